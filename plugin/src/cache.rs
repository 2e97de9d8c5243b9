//! Compiled components, cached in memory and on disk.
//!
//! Compiling a plugin takes tens of milliseconds; loading a serialized one takes a fraction of a
//! millisecond. Entries are keyed by a BLAKE3 hash of the component's bytes and of the engine's
//! compatibility hash (wasmtime version, target and settings), so a stale entry is never used.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::PathBuf;

use wasmtime::Engine;
use wasmtime::component::Component;

use crate::{Error, Result};

/// The cache of one engine.
pub struct ComponentCache {
    engine: Engine,
    dir: Option<PathBuf>,
    memory: HashMap<[u8; 32], Component>,
    /// How many components were compiled (not found in either cache).
    pub compiled: u64,
}

impl ComponentCache {
    /// A cache for `engine`, on disk under `dir` if given.
    pub fn new(engine: Engine, dir: Option<PathBuf>) -> Self {
        ComponentCache {
            engine,
            dir,
            memory: HashMap::new(),
            compiled: 0,
        }
    }

    fn key(&self, bytes: &[u8]) -> [u8; 32] {
        let mut compat = std::collections::hash_map::DefaultHasher::new();
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut compat);
        let mut hasher = blake3::Hasher::new();
        hasher.update(&compat.finish().to_le_bytes());
        hasher.update(env!("CARGO_PKG_VERSION").as_bytes());
        hasher.update(bytes);
        *hasher.finalize().as_bytes()
    }

    /// The compiled form of a component's bytes; `label` names it in errors.
    pub fn get(&mut self, bytes: &[u8], label: &str) -> Result<Component> {
        let key = self.key(bytes);
        if let Some(c) = self.memory.get(&key) {
            return Ok(c.clone());
        }
        let path = self.dir.as_ref().map(|d| {
            let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
            d.join(format!("{hex}.cwasm"))
        });
        if let Some(path) = path.as_ref().filter(|p| p.exists()) {
            // SAFETY: the file is in the host's own cache directory, written by `serialize`
            // below under a name that hashes the exact source bytes and the engine's
            // compatibility hash; wasmtime also checks its header against this engine.
            if let Ok(c) = unsafe { Component::deserialize_file(&self.engine, path) } {
                self.memory.insert(key, c.clone());
                return Ok(c);
            }
        }
        let component = Component::new(&self.engine, bytes).map_err(|e| Error::Load {
            plugin: label.to_string(),
            message: format!("not a valid Wasm component: {e:#}"),
        })?;
        self.compiled += 1;
        if let (Some(path), Ok(serialized)) = (path, component.serialize()) {
            // The cache is an optimization: failing to write it is not an error.
            if let Some(dir) = path.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let tmp = path.with_extension(format!("tmp{}", std::process::id()));
            if std::fs::write(&tmp, serialized).is_ok() {
                let _ = std::fs::rename(&tmp, &path);
            }
        }
        self.memory.insert(key, component.clone());
        Ok(component)
    }
}
