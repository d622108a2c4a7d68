//! TensorBoard event files (`events.out.tfevents.*`), written and read back.
//!
//! A file is a sequence of TFRecords (the length as a little-endian u64, the masked CRC-32C
//! of those 8 bytes, the record, the masked CRC-32C of the record), each record an `Event`
//! protocol buffer: the first holds the file version, the others a wall time, a step and a
//! summary of scalar values. TensorBoard, W&B (`wandb sync --sync-tensorboard`), MLflow and
//! Aim all import this format. It is written by hand: the four message fields used here are
//! all of it, and a protobuf toolchain would add a build step for them.
//!
//! Why records are written whole and unbuffered: a watcher (`tensorboard --logdir`) reads the
//! file while the run writes it, and a torn record at the end is what a killed run leaves;
//! [`read_scalars`] stops at such a tail rather than failing.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The file version TensorBoard expects in a file's first event.
const FILE_VERSION: &str = "brain.Event:2";

/// Why an event file could not be written or read.
#[derive(Debug, thiserror::Error)]
pub enum EventFileError {
    /// The operating system refused.
    #[error("cannot {action} TensorBoard event file `{}`", path.display())]
    Io {
        /// What pdsweep was doing.
        action: &'static str,
        /// The file (or its folder).
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A record's checksum does not match (the file was damaged).
    #[error("TensorBoard event file `{}` is damaged at byte {offset}", path.display())]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// Where the bad record begins.
        offset: usize,
    },
}

/// One scalar read back from an event file.
#[derive(Debug, Clone, PartialEq)]
pub struct Scalar {
    /// Its tag (`train/loss`, ...).
    pub tag: String,
    /// The step it was logged at.
    pub step: i64,
    /// The value.
    pub value: f32,
    /// Seconds since the Unix epoch.
    pub wall_time: f64,
}

/// An event file being appended to.
#[derive(Debug)]
pub(crate) struct EventFile {
    file: File,
    path: PathBuf,
}

impl EventFile {
    /// A new event file in `dir` (created if missing), its name unique to this process and
    /// moment (`events.out.tfevents.SECONDS.HOST.PID.N`), beginning with the version event.
    pub fn create(dir: &Path) -> Result<EventFile, EventFileError> {
        static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        std::fs::create_dir_all(dir).map_err(|source| EventFileError::Io {
            action: "create the folder of",
            path: dir.to_path_buf(),
            source,
        })?;
        let n = COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let now = now_seconds();
        let host = crate::store::this_host();
        let path = dir.join(format!(
            "events.out.tfevents.{}.{}.{}.{n}",
            now as u64,
            host.replace(['/', '.'], "_"),
            std::process::id()
        ));
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .open(&path)
            .map_err(|source| EventFileError::Io {
                action: "create",
                path: path.clone(),
                source,
            })?;
        let mut events = EventFile { file, path };
        let mut event = Vec::new();
        put_double(&mut event, 1, now);
        put_bytes(&mut event, 3, FILE_VERSION.as_bytes());
        events.append(&event)?;
        Ok(events)
    }

    /// The file's path.
    #[cfg(test)]
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends the scalars `values` (tag, value) at `step`, stamped now.
    pub fn scalars(&mut self, step: u64, values: &[(&str, f64)]) -> Result<(), EventFileError> {
        self.scalars_at(step, values, now_seconds())
    }

    /// Appends the scalars `values` at `step` with wall time `wall_time`.
    pub fn scalars_at(
        &mut self,
        step: u64,
        values: &[(&str, f64)],
        wall_time: f64,
    ) -> Result<(), EventFileError> {
        let mut summary = Vec::new();
        for (tag, value) in values {
            let mut v = Vec::new();
            put_bytes(&mut v, 1, tag.as_bytes());
            put_key(&mut v, 2, WIRE_32);
            v.extend_from_slice(&(*value as f32).to_le_bytes());
            put_bytes(&mut summary, 1, &v);
        }
        let mut event = Vec::new();
        put_double(&mut event, 1, wall_time);
        put_key(&mut event, 2, WIRE_VARINT);
        put_varint(&mut event, step);
        put_bytes(&mut event, 5, &summary);
        self.append(&event)
    }

    /// Writes `event` as one TFRecord, in one write.
    fn append(&mut self, event: &[u8]) -> Result<(), EventFileError> {
        let len = (event.len() as u64).to_le_bytes();
        let mut record = Vec::with_capacity(event.len() + 16);
        record.extend_from_slice(&len);
        record.extend_from_slice(&masked_crc(&len).to_le_bytes());
        record.extend_from_slice(event);
        record.extend_from_slice(&masked_crc(event).to_le_bytes());
        self.file
            .write_all(&record)
            .map_err(|source| EventFileError::Io {
                action: "append to",
                path: self.path.clone(),
                source,
            })
    }
}

/// Every scalar of the event file at `path`, in file order. A torn last record (a run killed
/// mid-write) ends the list; a record whose checksum is wrong is an error.
pub fn read_scalars(path: &Path) -> Result<Vec<Scalar>, EventFileError> {
    let bytes = std::fs::read(path).map_err(|source| EventFileError::Io {
        action: "read",
        path: path.to_path_buf(),
        source,
    })?;
    let corrupt = |offset| EventFileError::Corrupt {
        path: path.to_path_buf(),
        offset,
    };
    let mut scalars = Vec::new();
    let mut at = 0;
    while at + 12 <= bytes.len() {
        let len_bytes = &bytes[at..at + 8];
        let len = u64::from_le_bytes(len_bytes.try_into().map_err(|_| corrupt(at))?) as usize;
        if le_u32(&bytes[at + 8..at + 12]) != masked_crc(len_bytes) {
            return Err(corrupt(at));
        }
        let body = at + 12;
        let Some(end) = body.checked_add(len).filter(|e| e + 4 <= bytes.len()) else {
            break; // torn tail
        };
        let event = &bytes[body..end];
        if le_u32(&bytes[end..end + 4]) != masked_crc(event) {
            return Err(corrupt(at));
        }
        parse_event(event, &mut scalars).ok_or_else(|| corrupt(at))?;
        at = end + 4;
    }
    Ok(scalars)
}

/// The event files in `dir`, sorted by name (so by creation time within a host).
pub fn event_files(dir: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .is_some_and(|n| n.starts_with("events.out.tfevents."))
                })
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

fn now_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

fn le_u32(b: &[u8]) -> u32 {
    u32::from_le_bytes([b[0], b[1], b[2], b[3]])
}

/// TFRecord's masked CRC-32C.
fn masked_crc(bytes: &[u8]) -> u32 {
    let crc = crc32c::crc32c(bytes);
    crc.rotate_right(15).wrapping_add(0xa282_ead8)
}

const WIRE_VARINT: u8 = 0;
const WIRE_64: u8 = 1;
const WIRE_LEN: u8 = 2;
const WIRE_32: u8 = 5;

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn put_key(out: &mut Vec<u8>, field: u64, wire: u8) {
    put_varint(out, (field << 3) | wire as u64);
}

fn put_double(out: &mut Vec<u8>, field: u64, v: f64) {
    put_key(out, field, WIRE_64);
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, field: u64, bytes: &[u8]) {
    put_key(out, field, WIRE_LEN);
    put_varint(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// One protobuf field: its number and value.
enum Field<'a> {
    Varint(u64),
    Fixed64([u8; 8]),
    Bytes(&'a [u8]),
    Fixed32([u8; 4]),
}

/// The fields of one protobuf message, or `None` when it is malformed.
fn fields(mut msg: &[u8]) -> Option<Vec<(u64, Field<'_>)>> {
    let mut out = Vec::new();
    while !msg.is_empty() {
        let key = take_varint(&mut msg)?;
        let field = match (key & 7) as u8 {
            WIRE_VARINT => Field::Varint(take_varint(&mut msg)?),
            WIRE_64 => Field::Fixed64(take(&mut msg, 8)?.try_into().ok()?),
            WIRE_LEN => {
                let len = take_varint(&mut msg)? as usize;
                Field::Bytes(take(&mut msg, len)?)
            }
            WIRE_32 => Field::Fixed32(take(&mut msg, 4)?.try_into().ok()?),
            _ => return None,
        };
        out.push((key >> 3, field));
    }
    Some(out)
}

fn take<'a>(msg: &mut &'a [u8], n: usize) -> Option<&'a [u8]> {
    if msg.len() < n {
        return None;
    }
    let (head, rest) = msg.split_at(n);
    *msg = rest;
    Some(head)
}

fn take_varint(msg: &mut &[u8]) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = msg.split_first()?;
        *msg = rest;
        v |= ((b & 0x7f) as u64) << shift;
        if b < 0x80 {
            return Some(v);
        }
    }
    None
}

/// The scalars of one `Event` (none for the version event).
fn parse_event(event: &[u8], out: &mut Vec<Scalar>) -> Option<()> {
    let (mut wall_time, mut step, mut summary) = (0.0, 0i64, None);
    for (number, field) in fields(event)? {
        match (number, field) {
            (1, Field::Fixed64(b)) => wall_time = f64::from_le_bytes(b),
            (2, Field::Varint(v)) => step = v as i64,
            (5, Field::Bytes(b)) => summary = Some(b),
            _ => {}
        }
    }
    let Some(summary) = summary else {
        return Some(());
    };
    for (number, field) in fields(summary)? {
        let (1, Field::Bytes(value)) = (number, field) else {
            continue;
        };
        let (mut tag, mut scalar) = (String::new(), None);
        for (n, f) in fields(value)? {
            match (n, f) {
                (1, Field::Bytes(t)) => tag = String::from_utf8_lossy(t).into_owned(),
                (2, Field::Fixed32(v)) => scalar = Some(f32::from_le_bytes(v)),
                _ => {}
            }
        }
        if let Some(value) = scalar {
            out.push(Scalar {
                tag,
                step,
                value,
                wall_time,
            });
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_read_back_as_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = EventFile::create(dir.path()).unwrap();
        file.scalars_at(7, &[("train/loss", 2.5), ("train/lr", 3e-3)], 10.0)
            .unwrap();
        file.scalars_at(300, &[("heldout/bpb", 1.25)], 11.5)
            .unwrap();
        let read = read_scalars(file.path()).unwrap();
        assert_eq!(read.len(), 3);
        assert_eq!(read[0].tag, "train/loss");
        assert_eq!((read[0].step, read[0].value), (7, 2.5));
        assert_eq!(read[1].value, 3e-3_f32);
        assert_eq!((read[2].step, read[2].wall_time), (300, 11.5));
        assert_eq!(event_files(dir.path()), vec![file.path().to_path_buf()]);
    }

    /// The CRC is TFRecord's: the masked CRC-32C of TensorFlow's `crc32c_test` vector
    /// (32 zero bytes give 0x8a9136aa, rotated right by 15 bits plus 0xa282ead8 when
    /// masked).
    #[test]
    fn the_checksum_is_tfrecords_masked_crc32c() {
        assert_eq!(crc32c::crc32c(&[0u8; 32]), 0x8a91_36aa);
        assert_eq!(masked_crc(&[0u8; 32]), 0x0fd7_fffa);
    }

    #[test]
    fn a_torn_tail_ends_the_file_and_a_flipped_byte_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut file = EventFile::create(dir.path()).unwrap();
        file.scalars_at(1, &[("a", 1.0)], 1.0).unwrap();
        file.scalars_at(2, &[("a", 2.0)], 2.0).unwrap();
        let path = file.path().to_path_buf();
        let bytes = std::fs::read(&path).unwrap();
        std::fs::write(&path, &bytes[..bytes.len() - 5]).unwrap();
        assert_eq!(
            read_scalars(&path).unwrap().len(),
            1,
            "the torn record is dropped"
        );
        let mut flipped = bytes.clone();
        let last = flipped.len() - 6;
        flipped[last] ^= 0xff;
        std::fs::write(&path, &flipped).unwrap();
        let err = crate::error::chain(&read_scalars(&path).unwrap_err());
        assert!(err.contains("damaged at byte"), "{err}");
    }
}
