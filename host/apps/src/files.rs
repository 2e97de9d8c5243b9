//! The `files` interface, as the host serves it to applications: a store written to a file
//! of the job's directory, and a file read into a store, by the host (NumPy's `tofile` and
//! `fromfile`), so that large arrays never pass through the application's linear memory.
//!
//! A name is one plain file name: no directory part, no `.` or `..`, and never a symbolic
//! link (the application may make links in its directory through WASI; the host does not
//! follow them), so the host touches nothing outside the job's directory.

use std::path::{Component, Path, PathBuf};

use wasmtime::StoreContextMut;
use wasmtime::component::{Linker, Resource};
use weft_plugin::bindings::base::weft::plugin::types as wit;

use crate::linking::{AppState, AppStore};

/// The `files` interface's name, as components import it.
pub const FILES_INTERFACE: &str = "weft:plugin/files@0.1.0";

/// The path of file `name` of the job's directory `dir`, or why the host refuses it.
pub fn job_file(dir: Option<&Path>, call: &str, name: &str) -> Result<PathBuf, String> {
    let dir = dir.ok_or_else(|| format!("files.{call}: this job has no directory"))?;
    let mut parts = Path::new(name).components();
    match (parts.next(), parts.next()) {
        (Some(Component::Normal(_)), None) => {}
        _ => {
            return Err(format!(
                "files.{call}: `{name}` is not a plain file name of the job's directory"
            ));
        }
    }
    let path = dir.join(name);
    if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(format!(
            "files.{call}: `{name}` is a symbolic link, which the host does not follow"
        ));
    }
    Ok(path)
}

fn refused(message: String) -> wit::Error {
    wit::Error { message }
}

/// Adds the `files` interface to `linker`.
pub fn add_files(linker: &mut Linker<AppState>) -> wasmtime::Result<()> {
    let mut files = linker.instance(FILES_INTERFACE)?;
    files.func_wrap(
        "write-store",
        |mut cx: StoreContextMut<'_, AppState>, (a, name): (Resource<AppStore>, String)| {
            let state = cx.data_mut();
            let handle = state.table.get(&a)?.handle.clone();
            let written = job_file(state.dir.as_deref(), "write-store", &name).and_then(|path| {
                let bytes = state
                    .rt
                    .read_bytes(&handle)
                    .map_err(|e| format!("files.write-store `{name}`: {e}"))?;
                if let (Some(limit), Some(dir)) = (state.dir_bytes, state.dir.as_deref()) {
                    let replaced = std::fs::symlink_metadata(&path).map_or(0, |m| m.len());
                    let after = crate::job::dir_bytes(dir)
                        .saturating_sub(replaced)
                        .saturating_add(bytes.len() as u64);
                    if after > limit {
                        return Err(format!(
                            "files.write-store `{name}`: the job's files would hold {after} \
                             bytes, past its quota of {limit}"
                        ));
                    }
                }
                std::fs::write(&path, bytes).map_err(|e| format!("files.write-store `{name}`: {e}"))
            });
            Ok((written.map_err(refused),))
        },
    )?;
    files.func_wrap(
        "read-store",
        |mut cx: StoreContextMut<'_, AppState>, (name, dtype): (String, wit::Dtype)| {
            let state = cx.data_mut();
            let d = weft_plugin::convert::dtype(dtype);
            let limit = state.rt.config().limits.store_bytes;
            let made = job_file(state.dir.as_deref(), "read-store", &name).and_then(|path| {
                let fail = |e: String| format!("files.read-store `{name}`: {e}");
                let len = std::fs::metadata(&path)
                    .map_err(|e| fail(e.to_string()))?
                    .len();
                if len > limit {
                    return Err(fail(format!(
                        "{len} bytes, past the store limit of {limit} bytes"
                    )));
                }
                if len % d.size() as u64 != 0 {
                    return Err(fail(format!(
                        "{len} bytes are not a whole number of {d} elements"
                    )));
                }
                let bytes = std::fs::read(&path).map_err(|e| fail(e.to_string()))?;
                let n = bytes.len() as u64 / d.size() as u64;
                state
                    .rt
                    .store_from_bytes(&[n], d, &bytes)
                    .map_err(|e| fail(e.to_string()))
            });
            Ok((match made {
                Ok(handle) => Ok(state.table.push(AppStore { handle })?),
                Err(e) => Err(refused(e)),
            },))
        },
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_names_of_the_job_directory_that_are_not_links() {
        let dir = std::env::temp_dir().join(format!("weft-job-file-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        assert_eq!(
            job_file(Some(&dir), "read-store", "x.f64"),
            Ok(dir.join("x.f64"))
        );
        for bad in ["../x", "/etc/passwd", "a/b", "..", ".", ""] {
            let e = job_file(Some(&dir), "read-store", bad).expect_err(bad);
            assert!(e.contains("not a plain file name"), "{bad}: {e}");
        }
        std::os::unix::fs::symlink("/etc/passwd", dir.join("link")).expect("link");
        let e = job_file(Some(&dir), "read-store", "link").expect_err("a link");
        assert!(e.contains("symbolic link"), "{e}");
        let e = job_file(None, "write-store", "x").expect_err("no directory");
        assert!(e.contains("no directory"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
