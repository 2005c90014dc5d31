//! The files gate finds in a folder or an artifact (`report.json`,
//! `baseline.json`, `history.json`, `pr.json`, the reports of `gate history
//! --reports DIR`) are read only when they are regular files. A FIFO under
//! one of those names blocked `gate merge` forever at the open (#28 item
//! 15), and a device is never a report. Paths the user names (`--baseline
//! FILE`, `--budgets FILE`) are read as given: a stream there is asked for.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

/// Opens `path` for reading when it is a regular file (symbolic links
/// followed), without blocking on a FIFO; anything else is an error that
/// says what it is.
pub fn open_regular(path: &Path) -> io::Result<File> {
    let file = open_nonblocking(path)?;
    let kind = file.metadata()?.file_type();
    if kind.is_file() {
        return Ok(file);
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("it is {}, not a regular file", what(&kind)),
    ))
}

/// The text of the regular file at `path`, at most `limit` bytes: one byte
/// more is read, so an oversized file is refused rather than cut.
pub fn read_regular(path: &Path, limit: u64) -> io::Result<String> {
    let mut text = String::new();
    open_regular(path)?.take(limit + 1).read_to_string(&mut text)?;
    if text.len() as u64 > limit {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("it is larger than {limit} bytes, the most gate reads"),
        ));
    }
    Ok(text)
}

#[cfg(unix)]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer.
    // It changes nothing for a regular file's reads.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_nonblocking(path: &Path) -> io::Result<File> {
    File::open(path)
}

fn what(kind: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if kind.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() || kind.is_block_device() {
            return "a device";
        }
    }
    if kind.is_dir() {
        "a folder"
    } else {
        "not a file"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn regular_files_are_read_and_everything_else_is_named() {
        let t = tempfile_dir();
        let file = t.join("report.json");
        std::fs::write(&file, "{}").unwrap();
        assert_eq!(read_regular(&file, 2).unwrap(), "{}");
        let e = read_regular(&file, 1).unwrap_err().to_string();
        assert_eq!(e, "it is larger than 1 bytes, the most gate reads");
        assert_eq!(
            read_regular(&t, 10).unwrap_err().to_string(),
            "it is a folder, not a regular file"
        );
        #[cfg(unix)]
        {
            let e = read_regular(Path::new("/dev/zero"), 10).unwrap_err().to_string();
            assert_eq!(e, "it is a device, not a regular file");
            let fifo = t.join("fifo.json");
            let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
            // SAFETY: mkfifo(3) on a path in this test's own folder.
            assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            // Returns at once (no writer ever comes), naming what it is.
            let e = read_regular(&fifo, 10).unwrap_err().to_string();
            assert_eq!(e, "it is a FIFO (named pipe), not a regular file");
        }
        std::fs::remove_dir_all(&t).unwrap();
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("gate-input-{}", std::process::id()));
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
