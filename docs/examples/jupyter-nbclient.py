# A notebook executed on anypath's kernels by nbclient, through Jupyter
# Server's gateway kernel manager (what `jupyter nbconvert --execute` and
# papermill do with `--gateway-url`). SANDBOX is the sandbox listener,
# http://127.0.0.1:3001 under `cargo xtask up`.
import os

import nbformat
from jupyter_server.gateway.gateway_client import GatewayClient
from jupyter_server.gateway.managers import GatewayKernelManager
from nbclient import NotebookClient

gateway = GatewayClient.instance()
gateway.url = os.environ.get("SANDBOX", "http://127.0.0.1:3001")
# With a token (`anypath sandbox serve --token T`), also:
#   gateway.auth_token = T
#   gateway.ws_url = gateway.url.replace("http", "ws", 1) + "/token/" + T

notebook = nbformat.v4.new_notebook()
notebook.cells = [
    nbformat.v4.new_code_cell("import pandas as pd\ndf = pd.DataFrame({'region': ['north', 'south'], 'amount': [10, 20]})\ndf"),
    nbformat.v4.new_code_cell("df.plot.bar(x='region', y='amount');"),
    nbformat.v4.new_code_cell("print(df.amount.sum())"),
]
# nbclient starts the kernel through the gateway and shuts it down at the
# end. (A kernel manager passed in as `km=` is left running, and its open
# websocket keeps this process alive until the gateway client times out.)
NotebookClient(notebook, kernel_manager_class=GatewayKernelManager, kernel_name="python3").execute()

table, chart, total = (cell.outputs for cell in notebook.cells)
print(total[0].text.strip())  # 30
assert "<table" in table[0].data["text/html"]
assert any("image/png" in output.get("data", {}) for output in chart)
assert total[0].text == "30\n"
nbformat.write(notebook, "sales.ipynb")  # opens in JupyterLab with its outputs
