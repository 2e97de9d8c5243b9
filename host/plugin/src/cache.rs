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
//!
//! A key is a name, never a proof: each entry, in memory and on disk, keeps the component
//! bytes it was compiled from, and a hit is used only when they equal the bytes asked for.
//! The memory cache is bounded ([`MEMORY_LIMITS`]).

use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

use wasmtime::Engine;
use wasmtime::component::Component;
use weft_runtime::{BoundedCache, CacheLimits, Owner};

use crate::{Error, Result};

/// The bounds of the memory cache of compiled components: 64 components and 1 GiB, each
/// charged four times its source bytes (the source it keeps, and an estimate of its code).
pub const MEMORY_LIMITS: CacheLimits = CacheLimits {
    entries: 64,
    bytes: 1 << 30,
};

/// A compiled component and the bytes it was compiled from (to confirm a hit).
struct Entry {
    source: Vec<u8>,
    component: Component,
}

/// The cache of one engine.
pub struct ComponentCache {
    engine: Engine,
    dir: Option<PathBuf>,
    memory: BoundedCache<[u8; 32], Entry>,
    /// How many components were compiled (not found in either cache).
    pub compiled: u64,
}

impl ComponentCache {
    /// A cache for `engine`, on disk under `dir` if given.
    pub fn new(engine: Engine, dir: Option<PathBuf>) -> Self {
        ComponentCache {
            engine,
            dir,
            memory: BoundedCache::new(MEMORY_LIMITS),
            compiled: 0,
        }
    }

    /// The disk cache's directory, created private to the user if missing; `None` (no disk
    /// cache) when it cannot be made, is not a directory owned by this user, or lets others
    /// write into it.
    fn private_dir(&self) -> Option<&Path> {
        weft_runtime::private_dir::private_dir(self.dir.as_deref()?, "component cache")
    }

    fn key(&self, bytes: &[u8]) -> [u8; 32] {
        let mut compat = std::collections::hash_map::DefaultHasher::new();
        self.engine
            .precompile_compatibility_hash()
            .hash(&mut compat);
        let mut hasher = blake3::Hasher::new();
        hasher.update(&compat.finish().to_le_bytes());
        hasher.update(env!("CARGO_PKG_VERSION").as_bytes());
        // The entry format: code, source, source length, hash.
        hasher.update(b"weft-component-cache-2");
        hasher.update(bytes);
        *hasher.finalize().as_bytes()
    }

    /// The compiled form of a component's bytes; `label` names it in errors.
    pub fn get(&mut self, bytes: &[u8], label: &str) -> Result<Component> {
        let key = self.key(bytes);
        if let Some(e) = self.memory.get(&key)
            && e.source == bytes
        {
            return Ok(e.component.clone());
        }
        let path = self.private_dir().map(|d| {
            let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
            d.join(format!("{hex}.cwasm"))
        });
        if let Some(code) = path.as_deref().and_then(|p| verified_entry(p, bytes)) {
            // SAFETY: the bytes are an entry of the host's own private cache directory, written
            // by `serialize` below under a name that hashes the exact source bytes and the
            // engine's compatibility hash, and their hash matches the one written with them;
            // wasmtime also checks their header against this engine.
            if let Ok(c) = unsafe { Component::deserialize(&self.engine, code) } {
                self.remember(key, bytes, &c);
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
            write_entry(&path, &serialized, bytes);
        }
        self.remember(key, bytes, &component);
        Ok(component)
    }

    fn remember(&mut self, key: [u8; 32], source: &[u8], component: &Component) {
        let bytes = (source.len() as u64).saturating_mul(4);
        self.memory.insert(
            key,
            Entry {
                source: source.to_vec(),
                component: component.clone(),
            },
            Owner::RUNTIME,
            bytes,
        );
    }

    /// Components held in memory now.
    pub fn in_memory(&self) -> usize {
        self.memory.len()
    }
}

/// The code of the cache entry at `path`, if the file exists, its trailing BLAKE3 hash
/// matches, and the source it records is `source`. An entry is `code, source, the source's
/// length (8 bytes, little-endian), BLAKE3 hash of all before it`.
fn verified_entry(path: &Path, source: &[u8]) -> Option<Vec<u8>> {
    let mut bytes = std::fs::read(path).ok()?;
    let split = bytes.len().checked_sub(32)?;
    let hash = blake3::hash(&bytes[..split]);
    if hash.as_bytes() != &bytes[split..] {
        tracing::warn!(path = %path.display(), "a corrupt component cache entry: compiled again");
        return None;
    }
    let len_at = split.checked_sub(8)?;
    let mut len = [0u8; 8];
    len.copy_from_slice(&bytes[len_at..split]);
    let source_len = usize::try_from(u64::from_le_bytes(len)).ok()?;
    let code_len = len_at.checked_sub(source_len)?;
    if &bytes[code_len..len_at] != source {
        tracing::warn!(
            path = %path.display(),
            "a component cache entry of other source bytes under this key: compiled again"
        );
        return None;
    }
    bytes.truncate(code_len);
    Some(bytes)
}

/// Writes `code`, the `source` it was compiled from, and their BLAKE3 hash as the entry at
/// `path`, whole or not at all ([`weft_runtime::private_dir::write_whole`]), synced to disk.
fn write_entry(path: &Path, code: &[u8], source: &[u8]) {
    let length = (source.len() as u64).to_le_bytes();
    let mut hasher = blake3::Hasher::new();
    hasher.update(code);
    hasher.update(source);
    hasher.update(&length);
    let hash = hasher.finalize();
    weft_runtime::private_dir::write_whole(path, &[code, source, &length, hash.as_bytes()], true);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An empty component, and the same with a custom section: two valid components.
    fn components() -> (Vec<u8>, Vec<u8>) {
        let empty = b"\0asm\x0d\0\x01\0".to_vec();
        let mut other = empty.clone();
        other.extend_from_slice(&[0, 4, 3, b'a', b'b', b'c']);
        (empty, other)
    }

    #[test]
    fn a_memory_hit_is_confirmed_against_the_source_bytes() {
        let (a, b) = components();
        let mut cache = ComponentCache::new(Engine::default(), None);
        cache.get(&a, "a").expect("compiles");
        assert_eq!(cache.compiled, 1);
        cache.get(&a, "a").expect("cached");
        assert_eq!(cache.compiled, 1, "a true hit");
        // Forge a collision: `a`'s entry under `b`'s key.
        let (ka, kb) = (cache.key(&a), cache.key(&b));
        let forged = cache.memory.remove(&ka).expect("held");
        cache.memory.insert(kb, forged, Owner::RUNTIME, 0);
        cache.get(&b, "b").expect("compiles");
        assert_eq!(
            cache.compiled, 2,
            "another component's entry is never a hit"
        );
    }

    #[test]
    fn a_disk_entry_is_used_only_for_the_source_it_records() {
        let dir = std::env::temp_dir().join(format!("weft-cache-unit-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a directory");
        let path = dir.join("entry.cwasm");
        write_entry(&path, b"machine code", b"source one");
        assert_eq!(
            verified_entry(&path, b"source one").as_deref(),
            Some(&b"machine code"[..])
        );
        assert_eq!(verified_entry(&path, b"source two"), None);
        assert_eq!(verified_entry(&path, b"source on"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_memory_cache_is_bounded() {
        let (a, _) = components();
        let mut cache = ComponentCache::new(Engine::default(), None);
        for k in 0..(MEMORY_LIMITS.entries + 8) {
            let mut c = a.clone();
            // A custom section whose name makes each component distinct.
            let name = format!("n{k:05}");
            c.push(0);
            c.push(name.len() as u8 + 1);
            c.push(name.len() as u8);
            c.extend_from_slice(name.as_bytes());
            cache.get(&c, "c").expect("compiles");
            assert!(cache.in_memory() <= MEMORY_LIMITS.entries);
        }
        assert_eq!(cache.in_memory(), MEMORY_LIMITS.entries);
    }
}
