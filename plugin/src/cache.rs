//! Compiled components, cached in memory and on disk.
//!
//! Compiling a plugin takes tens of milliseconds; loading a serialized one takes a fraction of a
//! millisecond. Entries are keyed by a BLAKE3 hash of the component's bytes and of the engine's
//! compatibility hash (wasmtime version, target and settings), so a stale entry is never used.
//!
//! An entry is native code that the host will run, so the disk cache trusts only what it wrote
//! itself: the directory is created private to the user (mode `0700`) and refused (the cache
//! then stays in memory) when it is not owned by the user or others may write it; entries are
//! written to a private temporary file and renamed into place, and carry a BLAKE3 hash of their
//! bytes, checked before they are deserialized (a corrupted or truncated entry is compiled
//! again and replaced).

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

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

    /// The disk cache's directory, created private to the user if missing; `None` (no disk
    /// cache) when it cannot be made, is not a directory owned by this user, or lets others
    /// write into it.
    fn private_dir(&self) -> Option<&Path> {
        let dir = self.dir.as_deref()?;
        if !dir.exists() {
            let mut builder = std::fs::DirBuilder::new();
            builder.recursive(true);
            #[cfg(unix)]
            std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
            builder.create(dir).ok()?;
        }
        let meta = std::fs::symlink_metadata(dir).ok()?;
        if !meta.is_dir() {
            return None;
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::MetadataExt;
            // SAFETY: `geteuid` has no preconditions and cannot fail.
            let me = unsafe { libc::geteuid() };
            if meta.uid() != me || meta.mode() & 0o022 != 0 {
                tracing::warn!(
                    dir = %dir.display(),
                    "the component cache directory is not private to this user: not used"
                );
                return None;
            }
        }
        Some(dir)
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
        let path = self.private_dir().map(|d| {
            let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
            d.join(format!("{hex}.cwasm"))
        });
        if let Some(code) = path.as_deref().and_then(verified_entry) {
            // SAFETY: the bytes are an entry of the host's own private cache directory, written
            // by `serialize` below under a name that hashes the exact source bytes and the
            // engine's compatibility hash, and their hash matches the one written with them;
            // wasmtime also checks their header against this engine.
            if let Ok(c) = unsafe { Component::deserialize(&self.engine, code) } {
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
            write_entry(&path, &serialized);
        }
        self.memory.insert(key, component.clone());
        Ok(component)
    }
}

/// The code of the cache entry at `path` (its bytes without the trailing hash), if the file
/// exists and its trailing BLAKE3 hash matches.
fn verified_entry(path: &Path) -> Option<Vec<u8>> {
    let mut bytes = std::fs::read(path).ok()?;
    let split = bytes.len().checked_sub(32)?;
    let hash = blake3::hash(&bytes[..split]);
    if hash.as_bytes() != &bytes[split..] {
        tracing::warn!(path = %path.display(), "a corrupt component cache entry: compiled again");
        return None;
    }
    bytes.truncate(split);
    Some(bytes)
}

/// Writes `code` and its BLAKE3 hash as the entry at `path`: into a new temporary file only
/// this user may read (refusing one that exists), then renamed into place, so a reader sees a
/// whole entry or none.
fn write_entry(path: &Path, code: &[u8]) {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let written = options.open(&tmp).and_then(|mut f| {
        f.write_all(code)?;
        f.write_all(blake3::hash(code).as_bytes())?;
        f.sync_all()
    });
    if written.is_err() || std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
}
