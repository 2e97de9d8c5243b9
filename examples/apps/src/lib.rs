//! What the programs that build both ways (natively on the `weft` crate, and as application
//! components on `weft-app`) share: how each gets its plugins, its arguments and writes its
//! outputs. Only the making of the plugins differs between the two builds.

#[cfg(target_family = "wasm")]
extern crate weft_app as weft;

/// The numeric plugin: the host's, in a component; a fresh runtime's, natively.
pub fn numeric() -> Result<weft::Numeric, String> {
    #[cfg(target_family = "wasm")]
    {
        Ok(weft::Numeric::new())
    }
    #[cfg(not(target_family = "wasm"))]
    {
        let rt = weft::Runtime::new(weft::Config::from_env()).map_err(|e| e.to_string())?;
        weft::Numeric::new(rt, weft_plugin_artifacts::NUMERIC).map_err(|e| e.to_string())
    }
}

/// The sparse plugin beside `np`: the host's, in a component; loaded into `np`'s runtime,
/// natively.
pub fn sparse(np: &weft::Numeric) -> Result<weft::Sparse, String> {
    #[cfg(target_family = "wasm")]
    {
        Ok(weft::Sparse::new(np))
    }
    #[cfg(not(target_family = "wasm"))]
    {
        weft::Sparse::new(np, weft_plugin_artifacts::SPARSE).map_err(|e| e.to_string())
    }
}

/// The program's arguments after its name.
pub fn args() -> Vec<String> {
    std::env::args().skip(1).collect()
}

/// Argument `i` parsed as a `T`, or `default` when it is absent.
pub fn arg<T: std::str::FromStr>(args: &[String], i: usize, default: T) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    args.get(i).map_or(Ok(default), |a| {
        a.parse().map_err(|e| format!("argument {a:?}: {e}"))
    })
}

/// Writes `values` to `name` in the working directory (the job's directory, for a
/// component) as little-endian `f64`s.
pub fn write_f64s(name: &str, values: &[f64]) -> Result<(), String> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(name, bytes).map_err(|e| format!("cannot write {name}: {e}"))
}

/// Runs `run`; on an error, prints it after the program's name and exits with status 1.
pub fn main_of(name: &str, run: impl FnOnce() -> Result<(), String>) {
    if let Err(e) = run() {
        eprintln!("{name}: {e}");
        std::process::exit(1);
    }
}
