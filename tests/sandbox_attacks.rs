//! Hostile blocks. Each module names the boundary its tests prove; each test
//! is one attack that must be stopped by that boundary alone.

use crate::common;

use anypath_sandbox::{ExecError, ExecRequest, LimitOverrides};
use common::{error, exec, failure, run, success};

fn run_limited(code: &str, limits: LimitOverrides) -> anypath_sandbox::Report {
    exec(ExecRequest::new(code).with_limits(limits))
}

fn assert_refused(code: &str, node: &str, line: u32) {
    match error(&run(code)) {
        ExecError::Policy { node: n, line: l, message, .. } => {
            assert_eq!((n.as_str(), *l), (node, line), "{code}: {message}");
        }
        other => panic!("{code}: expected a policy refusal, got {other:?}"),
    }
}

fn assert_exception(report: &anypath_sandbox::Report, type_names: &[&str]) -> String {
    match error(report) {
        ExecError::Exception { type_name, message, .. } => {
            assert!(type_names.contains(&type_name.as_str()), "unexpected {type_name}: {message}");
            message.clone()
        }
        other => panic!("expected one of {type_names:?}, got {other:?}"),
    }
}

/// Boundary: the AST policy gate refuses the construct before any of the block runs.
mod policy_gate {
    use super::assert_refused;

    macro_rules! refused {
        ($($name:ident: $code:expr => $node:literal at $line:literal;)*) => {
            $( #[test] fn $name() { assert_refused($code, $node, $line) } )*
        };
    }

    refused! {
        import_os: "import os\nREPLY = {'status': 200}" => "Import" at 1;
        import_sys: "x = 1\nimport sys" => "Import" at 2;
        import_subprocess: "import subprocess" => "Import" at 1;
        import_socket: "import socket" => "Import" at 1;
        import_ctypes: "import ctypes" => "Import" at 1;
        import_importlib: "import importlib" => "Import" at 1;
        import_builtins: "import builtins" => "Import" at 1;
        import_io_for_files: "import io" => "Import" at 1;
        import_time_for_sleep: "import time" => "Import" at 1;
        from_os_import_system: "from os import system" => "ImportFrom" at 1;
        dotted_import_of_an_allowed_package: "import json.decoder" => "Import" at 1;
        relative_import: "from . import app" => "ImportFrom" at 1;
        private_name_from_allowed_module: "from json import _default_decoder" => "ImportFrom" at 1;
        dunder_import_call: "m = __import__('os')" => "Name" at 1;
        subclasses_walk: "x = ().__class__.__bases__[0].__subclasses__()" => "Attribute" at 1;
        store_internals: "d = store.__dict__" => "Attribute" at 1;
        private_store_attribute: "d = store._journal" => "Attribute" at 1;
        function_globals: "def f():\n    pass\ng = f.__globals__" => "Attribute" at 3;
        format_string_attribute_lookup: "s = '{0.__class__}'.format(1)" => "Attribute" at 1;
        format_map_lookup: "s = '{a.__class__}'.format_map({'a': 1})" => "Attribute" at 1;
        string_built_attribute_name: "x = getattr(store, '_' + '_dict__')" => "Name" at 1;
        eval_of_a_string: "x = eval('1 + 1')" => "Name" at 1;
        exec_of_a_string: "exec('import os')" => "Name" at 1;
        compile_of_a_string: "c = compile('1', 'x', 'eval')" => "Name" at 1;
        open_a_file: "f = open('/etc/passwd')" => "Name" at 1;
        globals_dict: "g = globals()" => "Name" at 1;
        vars_of_store: "v = vars(store)" => "Name" at 1;
        dir_probe: "d = dir()" => "Name" at 1;
        generator_frame_escape: "g = (x for x in [1]).gi_frame.f_globals" => "Attribute" at 1;
        type_builds_a_class: "T = type('T', (), {})" => "Name" at 1;
        mro_walk: "m = str.mro()" => "Attribute" at 1;
        lambda_expression: "f = lambda: 1" => "Lambda" at 1;
        class_definition: "class A:\n    pass" => "ClassDef" at 1;
        catching_base_exception: "try:\n    x = 1\nexcept BaseException:\n    pass" => "Name" at 3;
        bare_except: "try:\n    x = 1\nexcept:\n    pass" => "ExceptHandler" at 3;
        finally_can_swallow: "try:\n    x = 1\nfinally:\n    pass" => "Try" at 1;
        redirecting_the_journal: "store.name = 'other'" => "Attribute" at 1;
        global_statement: "def f():\n    global REPLY" => "Global" at 2;
        with_statement: "with x:\n    pass" => "With" at 1;
        breakpoint_call: "breakpoint()" => "Name" at 1;
        async_function: "async def f():\n    pass" => "AsyncFunctionDef" at 1;
        decorator: "def d(f):\n    return f\n@d\ndef g():\n    pass" => "FunctionDef" at 4;
        dunder_keyword: "d = dict(__class__=1)" => "keyword" at 1;
        syntax_error: "REPLY = {" => "SyntaxError" at 1;
    }
}

/// Boundary: module proxies hand a block only the public, non-module
/// attributes of an allowed module, so imported modules and string evaluators stay out of reach.
mod module_proxies {
    use super::*;

    #[test]
    fn uuid_does_not_expose_os() {
        assert_exception(&run("import uuid\nuuid.os.system('id')"), &["AttributeError"]);
    }

    #[test]
    fn typing_does_not_expose_sys_or_get_type_hints() {
        assert_exception(&run("import typing\ntyping.sys.modules"), &["AttributeError"]);
        assert_exception(&run("import typing\ntyping.get_type_hints(len)"), &["AttributeError"]);
    }

    #[test]
    fn json_does_not_expose_its_submodules() {
        assert_exception(&run("import json\njson.decoder.scanstring"), &["AttributeError"]);
    }
}

/// Boundary: the fuel budget stops CPU-bound blocks.
mod fuel {
    use super::*;

    #[test]
    fn infinite_loop_exhausts_fuel() {
        let report = run_limited("while True:\n    pass", LimitOverrides { fuel: Some(50_000_000), ..Default::default() });
        assert_eq!(error(&report), &ExecError::FuelExhausted { budget: 50_000_000 });
        assert!(report.metrics.fuel_consumed >= 50_000_000 - 1_000);
    }

    #[test]
    fn a_request_can_lower_fuel_below_start_up_cost() {
        let report = run_limited("REPLY = {'status': 200}", LimitOverrides { fuel: Some(1_000), ..Default::default() });
        assert_eq!(error(&report).kind(), "fuel_exhausted");
    }

    #[test]
    fn regex_backtracking_bomb_exhausts_fuel() {
        let code = "import re\nre.match(r'(a+)+$', 'a' * 40 + 'b')";
        let report = run_limited(code, LimitOverrides { fuel: Some(50_000_000), ..Default::default() });
        assert_eq!(error(&report).kind(), "fuel_exhausted");
    }
}

/// Boundary: the wall-clock deadline (epoch interruption plus a host-side timeout).
mod deadline {
    use super::*;

    #[test]
    fn busy_loop_hits_the_deadline_before_the_fuel_budget() {
        let report = run_limited("while True:\n    pass", LimitOverrides { timeout_ms: Some(50), ..Default::default() });
        assert_eq!(error(&report), &ExecError::Timeout { timeout_ms: 50 });
    }
}

/// Boundary: the memory cap on linear memory growth.
mod memory {
    use super::*;

    #[test]
    fn string_bomb_hits_the_memory_cap() {
        let report = run("x = 'a' * (1 << 30)");
        assert_eq!(error(&report), &ExecError::MemoryLimit { limit_bytes: 128 << 20 });
    }

    #[test]
    fn list_bomb_hits_the_memory_cap() {
        assert_eq!(error(&run("x = [0] * (100 * 1000 * 1000)")).kind(), "memory_limit");
    }

    #[test]
    fn gradual_growth_hits_the_memory_cap() {
        let code = "x = []\nwhile True:\n    x.append('y' * 100000)";
        assert_eq!(error(&run(code)).kind(), "memory_limit");
    }

    #[test]
    fn catching_memory_error_still_reports_the_breach() {
        let code = "try:\n    x = 'a' * (1 << 30)\nexcept Exception:\n    pass\nREPLY = {'status': 200}";
        assert_eq!(error(&run(code)).kind(), "memory_limit");
    }

    #[test]
    fn a_request_can_lower_the_memory_cap() {
        let report = run_limited("x = 'a' * (64 << 20)", LimitOverrides { memory_bytes: Some(40 << 20), ..Default::default() });
        assert_eq!(error(&report), &ExecError::MemoryLimit { limit_bytes: 40 << 20 });
    }

    #[test]
    fn recursion_bomb_is_a_python_exception_not_a_crash() {
        let message = assert_exception(&run("def f(n):\n    return f(n + 1)\nf(0)"), &["RecursionError"]);
        assert!(message.contains("recursion"), "{message}");
    }

    #[test]
    fn deeply_nested_reply_is_refused_not_a_crash() {
        let code = "x = []\nfor i in range(1000):\n    x = [x]\nREPLY = {'status': 200, 'body': x}";
        match error(&run(code)) {
            ExecError::InvalidReply { message } => assert!(message.contains("deeper than"), "{message}"),
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn deeply_nested_document_is_refused_by_the_store() {
        let code = "x = {}\nfor i in range(1000):\n    x = {'a': x}\nstore.insert(x)";
        assert_exception(&run(code), &["ValueError"]);
    }

    #[test]
    fn c_stack_exhaustion_traps_the_instance_without_hurting_the_host() {
        // Freeing a list nested 100,000 deep recurses in C past the native stack.
        let report = run("x = []\nfor i in range(100000):\n    x = [x]\nREPLY = {'status': 200}");
        assert!(matches!(error(&report).kind(), "trap" | "exception"), "{:?}", error(&report));
        assert_eq!(common::body(&run("REPLY = {'status': 200, 'body': 1}")), serde_json::json!(1));
    }
}

/// Boundary: output caps on captured streams, reply and journal, and on code and input size.
mod output {
    use super::*;

    #[test]
    fn stdout_flood_is_truncated_at_the_cap() {
        let report = run_limited(
            "for i in range(20000):\n    print('x' * 100)\nREPLY = {'status': 200}",
            LimitOverrides { stdout_bytes: Some(4096), ..Default::default() },
        );
        let ok = success(&report);
        assert!(ok.output.stdout_truncated);
        assert_eq!(ok.output.stdout.len(), 4096);
    }

    #[test]
    fn huge_reply_body_is_an_output_limit() {
        let report = run_limited("REPLY = {'status': 200, 'body': 'x' * 100000}", LimitOverrides { result_bytes: Some(10_000), ..Default::default() });
        assert_eq!(error(&report).kind(), "output_limit");
    }

    #[test]
    fn huge_journal_is_an_output_limit() {
        let code = "for i in range(50):\n    store.insert({'blob': 'x' * 1000})\nREPLY = {'status': 201}";
        let request = ExecRequest::new(code)
            .with_collection("members", 0, &serde_json::json!([]))
            .unwrap()
            .with_limits(LimitOverrides { result_bytes: Some(10_000), ..Default::default() });
        assert_eq!(error(&exec(request)).kind(), "output_limit");
    }

    #[test]
    fn oversize_code_is_refused_before_running() {
        let code = format!("x = 1\n{}", "# padding\n".repeat(10_000));
        let report = run(&code);
        assert_eq!(error(&report), &ExecError::CodeTooLarge { size_bytes: code.len() as u64, limit_bytes: 64 << 10 });
        assert_eq!(report.metrics.fuel_consumed, 0, "nothing ran");
    }

    #[test]
    fn oversize_input_is_refused_before_running() {
        let docs = serde_json::json!([{"id": 1, "blob": "x".repeat(2000)}]);
        let request = ExecRequest::new("REPLY = {'status': 200}")
            .with_collection("members", 1, &docs)
            .unwrap()
            .with_limits(LimitOverrides { max_input_bytes: Some(1000), ..Default::default() });
        assert_eq!(error(&exec(request)).kind(), "input_too_large");
    }
}

/// Boundary: the WebAssembly layer by itself. These run with the policy gate
/// switched off and must still be stopped: the instance has no preopened
// The WebAssembly layer by itself (the policy gate switched off) is proven
// by `crates/sandbox/src/wasm_layer_tests.rs`: the switch exists only in that
// crate's own test build.

/// Boundary: the host survives hostile load and keeps serving correctly.
mod resilience {
    use super::*;

    #[test]
    fn after_a_burst_of_hostile_executions_a_normal_one_is_correct() {
        let hostile = [
            "while True:\n    pass",
            "x = 'a' * (1 << 30)",
            "def f(n):\n    return f(n + 1)\nf(0)",
            "import os",
            "for i in range(100000):\n    print('x' * 100)",
        ];
        for code in hostile.iter().cycle().take(15) {
            let report = run_limited(code, LimitOverrides { timeout_ms: Some(500), ..Default::default() });
            assert!(report.outcome.is_err() || success(&report).output.stdout_truncated);
        }
        let report = common::run_with(
            "new_id = store.insert(dict(ctx['body_json']))\nREPLY = {'status': 201, 'body': store.get(new_id)}",
            serde_json::json!({"body_json": {"name": "Alice"}}),
            serde_json::json!([{"id": 1, "name": "x"}]),
        );
        assert_eq!(common::body(&report), serde_json::json!({"name": "Alice", "id": 2}));
        assert!(failure_free(&report));
    }

    fn failure_free(report: &anypath_sandbox::Report) -> bool {
        report.outcome.as_ref().map(|s| s.mutations.len() == 1).unwrap_or_else(|f| panic!("{:?}", failure_debug(f)))
    }

    fn failure_debug(f: &anypath_sandbox::Failure) -> String {
        format!("{:?}", f.error)
    }

    #[test]
    fn failure_keeps_output_captured_before_an_exception() {
        let report = run("print('before')\nraise ValueError('x')");
        assert_eq!(failure(&report).output.stdout, "before\n");
    }
}
