# E2B's Python SDK against anypath: three variables point it here, and the
# code is what it would be against E2B. (E2B is the E2B API's address,
# http://127.0.0.1:3002 under `cargo xtask up`.)
import os

os.environ.setdefault("E2B", "http://127.0.0.1:3002")
os.environ["E2B_API_URL"] = os.environ["E2B_SANDBOX_URL"] = os.environ["E2B"]
os.environ.setdefault("E2B_API_KEY", "e2b_0")

from e2b_code_interpreter import Sandbox  # noqa: E402

with Sandbox.create() as sbx:
    sbx.files.write("/home/user/sales.csv", "region,amount\nnorth,10\nsouth,20\n")
    execution = sbx.run_code("""
import pandas as pd
import matplotlib.pyplot as plt
df = pd.read_csv('sales.csv')
df.plot.bar(x='region', y='amount')
plt.show()
df
""")
    chart, table = execution.results
    print(chart.chart.type, table.data["amount"])  # bar [10, 20]
    assert chart.png and chart.chart.type.value == "bar"
    assert table.data["amount"] == [10, 20]
    sbx.run_code("total = 30")
    sbx.pause()  # the state goes to disk, in milliseconds
    resumed = Sandbox.connect(sbx.sandbox_id)
    assert resumed.run_code("total").text == "30"
