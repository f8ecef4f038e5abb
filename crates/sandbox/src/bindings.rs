//! Host bindings for the `runner` world in `wit/runner.wit`.

wasmtime::component::bindgen!({
    path: "../../wit",
    world: "runner",
    exports: { default: async },
});
