//! The log's final line when it lacks its newline.
//!
//! Lines are written whole and newline-terminated, so bytes after the last
//! newline mean a write was cut short (crash, full disk). Both opening the log
//! for appending and repairing it need to find those bytes without reading
//! the whole file.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

/// How far back each read looks for the last newline.
const CHUNK: u64 = 8 * 1024;

/// The bytes after the last newline of a file.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Unterminated {
    /// File offset where the unterminated line starts.
    pub(crate) offset: u64,
    /// The line's bytes.
    pub(crate) bytes: Vec<u8>,
}

impl Unterminated {
    /// Whether the line is a torn write rather than a whole JSON value that
    /// only lost its newline; only the former is safe to cut off.
    pub(crate) fn is_torn(&self) -> bool {
        serde_json::from_slice::<serde_json::Value>(&self.bytes).is_err()
    }
}

/// Returns the final line if the file does not end with a newline.
pub(crate) fn unterminated_tail(file: &mut File) -> io::Result<Option<Unterminated>> {
    let len = file.metadata()?.len();
    let mut start = len;
    let mut tail = Vec::new();
    // Walk backwards chunk by chunk; lines are short, so one read is usual.
    while start > 0 {
        let chunk_start = start.saturating_sub(CHUNK);
        // At most CHUNK bytes, so the cast cannot truncate.
        let mut chunk = vec![0; (start - chunk_start) as usize];
        file.seek(SeekFrom::Start(chunk_start))?;
        file.read_exact(&mut chunk)?;
        if let Some(newline) = chunk.iter().rposition(|&byte| byte == b'\n') {
            chunk.drain(..=newline);
            chunk.extend_from_slice(&tail);
            return Ok(non_empty(chunk_start + newline as u64 + 1, chunk));
        }
        chunk.extend_from_slice(&tail);
        tail = chunk;
        start = chunk_start;
    }
    Ok(non_empty(0, tail))
}

fn non_empty(offset: u64, bytes: Vec<u8>) -> Option<Unterminated> {
    (!bytes.is_empty()).then_some(Unterminated { offset, bytes })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn tail_of(content: &[u8]) -> Option<Unterminated> {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(content).unwrap();
        unterminated_tail(&mut file).unwrap()
    }

    #[test]
    fn terminated_or_empty_files_have_no_tail() {
        assert_eq!(tail_of(b""), None);
        assert_eq!(tail_of(b"{}\n{}\n"), None);
    }

    #[test]
    fn finds_the_bytes_after_the_last_newline() {
        let tail = tail_of(b"{}\n{\"a\":").unwrap();
        assert_eq!((tail.offset, tail.bytes.as_slice()), (3, &b"{\"a\":"[..]));
        assert!(tail.is_torn());
        assert!(!tail_of(b"{}\n{}").unwrap().is_torn());
    }

    #[test]
    fn tails_longer_than_a_chunk_are_found_whole() {
        let long = vec![b'x'; CHUNK as usize * 2 + 5];
        let mut content = b"{}\n".to_vec();
        content.extend_from_slice(&long);
        let tail = tail_of(&content).unwrap();
        assert_eq!((tail.offset, tail.bytes.len()), (3, long.len()));
        assert_eq!(tail_of(&long).unwrap().offset, 0);
    }
}
