//! Cranelift's compiled functions, cached in memory and on disk, so that a program's second
//! process (and a kernel compiled again in one process) skips code generation.
//!
//! Compiling a kernel is almost all Cranelift's code generation (a millisecond or so a
//! function: register allocation, the optimizer, encoding); Weft's own lowering to Cranelift's
//! IR is a small part. Cranelift's incremental cache keys a function by a SHA-256 hash of its
//! IR *stencil* (the function without the names of what it calls or reads) and of the ISA's
//! flags and features, and stores the compiled stencil, to which it applies the names again on
//! a hit. The functions Cranelift compiles hold no address of this process: the cancel flag
//! and constant tables are symbols resolved when the module is finalized (see
//! `lower::address_symbol`), so an entry serves every process of this Cranelift version on this
//! CPU. (The wide bodies, which Weft encodes itself in a fraction of the time, are not cached
//! and keep their tables' addresses.)
//!
//! An entry is native code that the host will run, so the disk cache trusts only what it
//! wrote: the directory must be private to the user ([`weft_runtime::private_dir`]); each file
//! is written whole under its key's name and carries a BLAKE3 hash of its bytes, checked
//! before Cranelift reads it (a corrupt or truncated entry is compiled again and replaced).
//! Code comes from the host's own lowering of kernel IR, never from plugin bytes, so a plugin
//! chooses no entry's contents, only (through its kernels) which functions are compiled.
//!
//! Both levels are bounded: the memory cache by [`MEMORY_BYTES`] (oldest first out), the
//! directory by [`DISK_BYTES`] (the files least recently written leave when a compiler opens
//! the directory and finds it over; the directory is measured at most once per
//! [`TRIM_EVERY`], so that opening it stays one `stat` however many entries it holds).
//!
//! Entries are shared by every runtime of the user, tenants of one service included: a hit
//! tells a tenant (by its compile time) only that the same function was compiled before.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::path::{Path, PathBuf};

use cranelift_codegen::incremental_cache::CacheKvStore;

/// The bytes of compiled functions held in memory, per compiler.
pub const MEMORY_BYTES: u64 = 64 << 20;

/// The bytes of entries a cache directory keeps: past it, the oldest go until three quarters
/// are left.
pub const DISK_BYTES: u64 = 512 << 20;

/// How often a directory is measured against [`DISK_BYTES`]: the modification time of its
/// `trimmed` file says when it last was.
pub const TRIM_EVERY: std::time::Duration = std::time::Duration::from_secs(3600);

/// The name of the file whose modification time is the directory's last measure.
const TRIMMED: &str = "trimmed";

/// The first bytes of every entry file: the format's name and version.
const MAGIC: &[u8; 8] = b"weftcl01";

/// What the cache did so far.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FunctionCacheStats {
    /// Functions found in memory.
    pub memory_hits: u64,
    /// Functions found on disk (not in memory).
    pub disk_hits: u64,
    /// Functions compiled (found in neither).
    pub misses: u64,
    /// Entries written to disk.
    pub disk_writes: u64,
    /// Entry files refused: a hash that did not match their bytes, or a format not this one.
    pub disk_rejected: u64,
}

/// The cache of one compiler: compiled functions by Cranelift's key, in memory and, if given a
/// private directory, on disk.
#[derive(Debug, Default)]
pub struct FunctionCache {
    memory: RefCell<Memory>,
    dir: Option<PathBuf>,
    stats: Cell<FunctionCacheStats>,
}

/// The memory level: entries by key, and their keys oldest first.
#[derive(Debug, Default)]
struct Memory {
    entries: HashMap<Vec<u8>, Vec<u8>>,
    order: VecDeque<Vec<u8>>,
    bytes: u64,
}

impl Memory {
    fn insert(&mut self, key: &[u8], value: Vec<u8>) {
        if self.entries.contains_key(key) {
            return;
        }
        self.bytes += value.len() as u64;
        self.entries.insert(key.to_vec(), value);
        self.order.push_back(key.to_vec());
        while self.bytes > MEMORY_BYTES {
            let Some(old) = self.order.pop_front() else {
                break;
            };
            if let Some(v) = self.entries.remove(&old) {
                self.bytes -= v.len() as u64;
            }
        }
    }
}

impl FunctionCache {
    /// A cache in memory only.
    pub fn in_memory() -> FunctionCache {
        FunctionCache::default()
    }

    /// A cache in memory and under `dir`, which is created private to the user if missing; a
    /// directory that is not private to the user is not used (the cache stays in memory), and
    /// one over [`DISK_BYTES`] is trimmed first.
    pub fn on_disk(dir: &Path) -> FunctionCache {
        let dir =
            weft_runtime::private_dir::private_dir(dir, "kernel cache").map(Path::to_path_buf);
        if let Some(d) = &dir
            && due(d)
        {
            trim(d, DISK_BYTES);
        }
        FunctionCache {
            dir,
            ..FunctionCache::default()
        }
    }

    /// The directory in use, if any.
    pub fn dir(&self) -> Option<&Path> {
        self.dir.as_deref()
    }

    /// What the cache did so far.
    pub fn stats(&self) -> FunctionCacheStats {
        self.stats.get()
    }

    fn count(&self, f: impl FnOnce(&mut FunctionCacheStats)) {
        let mut s = self.stats.get();
        f(&mut s);
        self.stats.set(s);
    }

    fn path(&self, key: &[u8]) -> Option<PathBuf> {
        let hex: String = key.iter().map(|b| format!("{b:02x}")).collect();
        Some(self.dir.as_ref()?.join(hex))
    }

    /// The entry at `path`, if its file exists, is of this format and its hash matches.
    fn read_entry(&self, path: &Path) -> Option<Vec<u8>> {
        let bytes = std::fs::read(path).ok()?;
        let verified = bytes
            .strip_prefix(MAGIC.as_slice())
            .and_then(|rest| rest.split_last_chunk::<32>())
            .filter(|(body, hash)| blake3::hash(body).as_bytes() == *hash)
            .map(|(body, _)| body.to_vec());
        if verified.is_none() {
            tracing::warn!(path = %path.display(), "a corrupt kernel cache entry: compiled again");
            self.count(|s| s.disk_rejected += 1);
        }
        verified
    }
}

impl CacheKvStore for FunctionCache {
    fn get(&self, key: &[u8]) -> Option<Cow<'_, [u8]>> {
        if let Some(v) = self.memory.borrow().entries.get(key) {
            self.count(|s| s.memory_hits += 1);
            return Some(Cow::Owned(v.clone()));
        }
        let value = self.read_entry(&self.path(key)?)?;
        self.count(|s| s.disk_hits += 1);
        self.memory.borrow_mut().insert(key, value.clone());
        Some(Cow::Owned(value))
    }

    fn insert(&mut self, key: &[u8], value: Vec<u8>) {
        self.count(|s| s.misses += 1);
        if let Some(path) = self.path(key) {
            let hash = blake3::hash(&value);
            // Not synced: a torn entry fails its hash and is compiled again.
            if weft_runtime::private_dir::write_whole(
                &path,
                &[MAGIC.as_slice(), &value, hash.as_bytes()],
                false,
            ) {
                self.count(|s| s.disk_writes += 1);
            }
        }
        self.memory.get_mut().insert(key, value);
    }
}

/// Whether `dir` was last measured more than [`TRIM_EVERY`] ago (or never); if so, marks it
/// measured now.
fn due(dir: &Path) -> bool {
    let marker = dir.join(TRIMMED);
    let recent = std::fs::metadata(&marker)
        .and_then(|m| m.modified())
        .ok()
        .and_then(|t| t.elapsed().ok())
        .is_some_and(|age| age < TRIM_EVERY);
    if recent {
        return false;
    }
    weft_runtime::private_dir::write_whole(&marker, &[], false);
    true
}

/// Removes the entries of `dir` written longest ago until at most three quarters of `limit`
/// bytes are left, if it holds more than `limit`.
fn trim(dir: &Path, limit: u64) {
    let Ok(read) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, u64, PathBuf)> = read
        .filter_map(|e| {
            let e = e.ok()?;
            let meta = e.metadata().ok()?;
            let modified = meta.modified().ok()?;
            (meta.is_file() && e.file_name() != TRIMMED).then(|| (modified, meta.len(), e.path()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    if total <= limit {
        return;
    }
    files.sort();
    for (_, len, path) in files {
        if total <= limit / 4 * 3 {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total -= len;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("weft-code-cache-{name}-{}", std::process::id()))
    }

    #[test]
    fn an_entry_comes_back_from_disk_in_a_fresh_cache_and_a_corrupt_one_does_not() {
        let dir = scratch("disk");
        let _ = std::fs::remove_dir_all(&dir);
        let mut first = FunctionCache::on_disk(&dir);
        assert_eq!(first.dir(), Some(dir.as_path()));
        first.insert(b"key-1", b"compiled".to_vec());
        assert_eq!(first.get(b"key-1").as_deref(), Some(b"compiled".as_slice()));
        assert_eq!(first.stats().memory_hits, 1);
        assert_eq!(first.stats().disk_writes, 1);

        let second = FunctionCache::on_disk(&dir);
        assert_eq!(
            second.get(b"key-1").as_deref(),
            Some(b"compiled".as_slice())
        );
        assert_eq!(second.stats().disk_hits, 1);
        assert_eq!(second.get(b"key-2"), None);

        // Flip one byte of the entry: refused, and counted.
        let path = second.path(b"key-1").expect("a path");
        let mut bytes = std::fs::read(&path).expect("read");
        let at = MAGIC.len() + 2;
        bytes[at] ^= 1;
        std::fs::write(&path, &bytes).expect("write");
        let third = FunctionCache::on_disk(&dir);
        assert_eq!(third.get(b"key-1"), None);
        assert_eq!(third.stats().disk_rejected, 1);
        // Truncated below its hash: refused too.
        std::fs::write(&path, &bytes[..10]).expect("write");
        assert_eq!(third.get(b"key-1"), None);
        assert_eq!(third.stats().disk_rejected, 2);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[cfg(unix)]
    #[test]
    fn a_directory_others_may_write_is_not_used() {
        use std::os::unix::fs::PermissionsExt;
        let dir = scratch("open");
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let mut cache = FunctionCache::on_disk(&dir);
        assert_eq!(cache.dir(), None);
        cache.insert(b"k", b"v".to_vec());
        assert_eq!(cache.stats().disk_writes, 0);
        assert_eq!(std::fs::read_dir(&dir).expect("list").count(), 0);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn memory_keeps_its_bound_oldest_out_first() {
        let mut cache = FunctionCache::in_memory();
        let big = vec![0u8; (MEMORY_BYTES / 4) as usize];
        for k in 0..6u8 {
            cache.insert(&[k], big.clone());
        }
        let memory = cache.memory.borrow();
        assert!(memory.bytes <= MEMORY_BYTES);
        assert!(
            !memory.entries.contains_key([0u8].as_slice()),
            "the oldest left"
        );
        assert!(
            memory.entries.contains_key([5u8].as_slice()),
            "the newest stays"
        );
    }

    #[test]
    fn a_directory_is_measured_at_most_once_an_hour() {
        let dir = scratch("due");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        assert!(due(&dir), "never measured");
        assert!(!due(&dir), "just measured");
        let old = std::time::SystemTime::now() - TRIM_EVERY - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .write(true)
            .open(dir.join(TRIMMED))
            .and_then(|f| f.set_modified(old))
            .expect("touch");
        assert!(due(&dir), "measured over an hour ago");
        assert!(!due(&dir));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_directory_over_its_bound_loses_its_oldest_entries() {
        let dir = scratch("trim");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("dir");
        for k in 0..8 {
            std::fs::write(dir.join(format!("e{k}")), vec![0u8; 100]).expect("write");
            // Distinct modification times, oldest first.
            let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 + k);
            std::fs::File::options()
                .write(true)
                .open(dir.join(format!("e{k}")))
                .and_then(|f| f.set_modified(t))
                .expect("touch");
        }
        std::fs::write(dir.join(TRIMMED), b"").expect("marker");
        trim(&dir, 500);
        let mut left: Vec<String> = std::fs::read_dir(&dir)
            .expect("list")
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .collect();
        left.sort();
        assert_eq!(
            left,
            ["e5", "e6", "e7", TRIMMED],
            "down to three quarters, newest kept, the marker neither counted nor removed"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
