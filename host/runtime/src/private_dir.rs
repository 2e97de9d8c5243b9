//! Directories of the host's disk caches, private to the user, and entries written whole.
//!
//! A disk cache that holds native code (compiled components, compiled kernels) must trust only
//! what this user's processes wrote: its directory is created with mode `0700` and refused
//! when another user owns it or others may write into it, and an entry is written to a new
//! temporary file that only this user may read, then renamed into place, so that a reader sees
//! a whole entry or none.

use std::path::Path;

/// `dir`, created private to the user if missing; `None` (the cache then stays in memory) when
/// it cannot be made, is not a directory owned by this user, or lets others write into it.
/// `what` names the cache in the warning.
pub fn private_dir<'a>(dir: &'a Path, what: &str) -> Option<&'a Path> {
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
        let me = rustix::process::geteuid().as_raw();
        if meta.uid() != me || meta.mode() & 0o022 != 0 {
            tracing::warn!(
                dir = %dir.display(),
                "the {what} directory is not private to this user: not used"
            );
            return None;
        }
    }
    Some(dir)
}

/// Writes `parts`, one after the other, as the file `path`: into a new temporary file beside
/// it that only this user may read (refusing one that exists: another writer is at it), then
/// renamed into place; with `sync`, the data reaches the disk before the rename. Whether the
/// entry was written: a cache is an optimization, and failing to write it is not an error.
pub fn write_whole(path: &Path, parts: &[&[u8]], sync: bool) -> bool {
    use std::io::Write;
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    // Another writer's temporary file is left alone: only one this call made is removed.
    let Ok(mut file) = options.open(&tmp) else {
        return false;
    };
    let written = parts
        .iter()
        .try_for_each(|part| file.write_all(part))
        .and_then(|()| if sync { file.sync_all() } else { Ok(()) });
    drop(file);
    if written.is_err() || std::fs::rename(&tmp, path).is_err() {
        let _ = std::fs::remove_file(&tmp);
        return false;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fresh_directory_is_private_and_an_open_one_is_refused() {
        let base = std::env::temp_dir().join(format!("weft-private-{}", std::process::id()));
        let fresh = base.join("fresh");
        assert_eq!(private_dir(&fresh, "test cache"), Some(fresh.as_path()));
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(&fresh)
                .expect("made")
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o700);
            std::fs::set_permissions(&fresh, std::fs::Permissions::from_mode(0o777))
                .expect("chmod");
            assert_eq!(
                private_dir(&fresh, "test cache"),
                None,
                "others may write it"
            );
        }
        let file = base.join("a-file");
        std::fs::write(&file, b"x").expect("write");
        assert_eq!(private_dir(&file, "test cache"), None, "not a directory");
        let _ = std::fs::remove_dir_all(&base);
    }

    #[test]
    fn an_entry_is_written_whole_and_a_busy_one_is_left_alone() {
        let dir = std::env::temp_dir().join(format!("weft-whole-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let path = dir.join("entry");
        assert!(write_whole(&path, &[b"ab", b"cd"], false));
        assert_eq!(std::fs::read(&path).expect("read"), b"abcd");
        // Another writer's temporary file: this one gives up, the entry stays as it was.
        let tmp = path.with_extension(format!("tmp{}", std::process::id()));
        std::fs::write(&tmp, b"partial").expect("write");
        assert!(!write_whole(&path, &[b"xy"], true));
        assert_eq!(std::fs::read(&path).expect("read"), b"abcd");
        assert_eq!(
            std::fs::read(&tmp).expect("still there"),
            b"partial",
            "the other writer's file is not touched"
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
