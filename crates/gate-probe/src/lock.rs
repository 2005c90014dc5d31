//! One measurement per GPU at a time: two gate runs on one runner would see
//! each other's memory. An advisory file lock per device, held by `gate
//! check` for the whole run.

use std::fs::{File, OpenOptions};
use std::path::PathBuf;

pub struct DeviceLock {
    _file: File,
    pub path: PathBuf,
}

/// Takes the lock for `device` (e.g. `cuda0`), waiting for another run to finish.
/// `on_wait` is called once if the lock is busy.
pub fn acquire(device: &str, on_wait: impl FnOnce(&PathBuf)) -> std::io::Result<DeviceLock> {
    let path = std::env::temp_dir().join(format!("gate-{device}.lock"));
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            on_wait(&path);
            file.lock()?;
        }
        Err(std::fs::TryLockError::Error(e)) => return Err(e),
    }
    Ok(DeviceLock { _file: file, path })
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_second_holder_waits_until_the_first_releases() {
        let name = format!("test{}", std::process::id());
        let first = super::acquire(&name, |_| panic!("free lock")).unwrap();
        let path = first.path.clone();
        let handle = std::thread::spawn(move || {
            let mut waited = false;
            let _second = super::acquire(&name, |_| waited = true).unwrap();
            waited
        });
        std::thread::sleep(std::time::Duration::from_millis(100));
        drop(first);
        assert!(handle.join().unwrap(), "the second run had to wait");
        // A real device's lock file stays for the next run; this test's
        // device name is its own and never used again.
        let _ = std::fs::remove_file(path);
    }
}
