//! Raft RPC frames: the wire format shared by the peer client and `serve_raft`.
//!
//! ```text
//!   0   4  len          u32 LE: bytes after this 8-byte header (kind + request id + body)
//!   4   4  crc32c       u32 LE: CRC32C of those `len` bytes
//!   8   1  kind         Hello | AppendEntries | Vote | InstallSnapshot | TimeoutNow | Removed |
//!                       LogState | Forward | Features | Grouped | CrossGroup | Response
//!   9   8  request id   u64 LE: chosen by the client, echoed in the Response
//!  17   n  body         bincode 1.3 (fixint, no trailing bytes) of the request or the result
//! ```
//!
//! A request of Raft group g > 0 (issue 32) is a `Grouped` frame whose body starts with the
//! group and the request's own kind, then that request's body:
//!
//! ```text
//!  17   4  group        u32 LE, not 0
//!  21   1  kind         the request's kind (a Raft RPC: AppendEntries … LogState)
//!  22   n  body         as above
//! ```
//!
//! Group 0's requests keep the plain layout, byte for byte what onelog 0.1.0 sends, so a
//! one-group cluster's wire is unchanged; a node sends `Grouped` frames only to a cluster
//! that runs several groups, which needs `onelog.version` 7 finalized (every member reads
//! them; a 0.1.0 peer would close the connection on the unknown kind).
//!
//! `len` is checked against a limit before the frame is allocated, so a corrupt or hostile
//! length costs nothing; the CRC catches damage TCP's checksum lets through. Any error here
//! means the byte stream can no longer be trusted: callers close the connection.

use bincode::Options;
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::mpsc;

use crate::limits;

/// The length and CRC words in front of every frame.
pub const HEADER_BYTES: usize = 8;
/// Kind and request id: counted in `len` and covered by the CRC.
pub const PREFIX_BYTES: usize = 9;
/// A `Grouped` frame's group and inner kind, after the prefix.
pub const GROUPED_BYTES: usize = 5;
// The length word is a u32, and an AppendEntries at its byte limit must fit in a frame.
const _: () = assert!(limits::RAFT_FRAME_BYTES_MAX <= u32::MAX as usize);
const _: () = assert!(limits::RAFT_APPEND_ENTRIES_BYTES_MAX < limits::RAFT_FRAME_BYTES_MAX);

/// Bumped on any incompatible change to the frame or to a body; checked in the handshake.
/// 2: the handshake authenticates both ends (`auth`).
pub const PROTOCOL_VERSION: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    /// The handshake's frames (`auth`: Hello, Challenge, Auth; request id 0).
    Hello = 1,
    AppendEntries = 2,
    Vote = 3,
    InstallSnapshot = 4,
    /// Leadership handover: the leader asks an up-to-date follower to stand for election.
    TimeoutNow = 5,
    /// The leader tells a node it removed from the membership, which it no longer replicates to.
    Removed = 6,
    /// A node that starts with an empty log asks how much log a peer holds (`log_state`).
    LogState = 7,
    /// A Kafka request a follower forwards to the leader, with its principal (`envelope`).
    Forward = 8,
    /// Which feature levels the peer's build supports (`features`); new in onelog 0.2.0, so
    /// a 0.1.0 peer closes the connection on it.
    Features = 9,
    /// A request of Raft group > 0: group and inner kind lead the body (module docs). Never
    /// a decoded frame's kind: the reader unwraps it into [`Frame::group`] and the inner kind.
    Grouped = 10,
    /// A message between Raft groups' leaders for a transaction across groups (`xgroup`); only
    /// a cluster of several groups at `onelog.version` 8 sends it.
    CrossGroup = 11,
    /// `Result<response, RaftError>` of the request with the same id.
    Response = 0x80,
}

impl TryFrom<u8> for Kind {
    type Error = FrameError;

    fn try_from(byte: u8) -> Result<Self, FrameError> {
        Ok(match byte {
            1 => Kind::Hello,
            2 => Kind::AppendEntries,
            3 => Kind::Vote,
            4 => Kind::InstallSnapshot,
            5 => Kind::TimeoutNow,
            6 => Kind::Removed,
            7 => Kind::LogState,
            8 => Kind::Forward,
            9 => Kind::Features,
            10 => Kind::Grouped,
            11 => Kind::CrossGroup,
            0x80 => Kind::Response,
            other => return Err(FrameError::UnknownKind(other)),
        })
    }
}

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error("frame length {len} exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
    #[error("frame length {len} is shorter than its {PREFIX_BYTES}-byte kind and request id")]
    TooShort { len: usize },
    #[error("frame CRC32C mismatch: header says {expected:#010x}, bytes give {actual:#010x}")]
    Crc { expected: u32, actual: u32 },
    #[error("unknown frame kind {0:#04x}")]
    UnknownKind(u8),
    #[error("a {0:?} frame where a request was expected")]
    Unexpected(Kind),
    #[error("a Grouped frame names group 0 or wraps a {0:?} frame, which is never grouped")]
    BadGroup(Kind),
    #[error("frame body: {0}")]
    Body(#[from] bincode::Error),
}

/// One received frame; `buf` holds kind, request id and body, as covered by the CRC. A
/// `Grouped` frame arrives unwrapped: its group, its inner kind, the body after them.
#[derive(Debug)]
pub struct Frame {
    pub kind: Kind,
    /// The Raft group the request is for: 0 unless it came in a `Grouped` frame.
    pub group: u32,
    pub request_id: u64,
    buf: Vec<u8>,
    /// Where the body starts in `buf`.
    body_at: usize,
}

impl Frame {
    pub fn body(&self) -> &[u8] {
        &self.buf[self.body_at..]
    }

    pub fn decode_body<T: DeserializeOwned>(&self) -> Result<T, FrameError> {
        Ok(bincode_options(self.buf.len()).deserialize(self.body())?)
    }
}

/// bincode with an allocation limit: a length inside a body can never make the decoder
/// allocate more than the frame it came in.
fn bincode_options(limit_bytes: usize) -> impl Options {
    bincode::DefaultOptions::new()
        .with_fixint_encoding()
        .reject_trailing_bytes()
        .with_limit(limit_bytes as u64)
}

/// Bytes `body` encodes to, or `None` once it passes `limit_bytes` (stops counting there).
pub fn body_size<T: Serialize>(body: &T, limit_bytes: usize) -> Option<usize> {
    bincode_options(limit_bytes).serialized_size(body).ok().map(|n| n as usize)
}

/// Encodes one whole frame, header included, ready to be written.
pub fn encode<T: Serialize>(
    kind: Kind,
    request_id: u64,
    body: &T,
    max: usize,
) -> Result<Vec<u8>, FrameError> {
    encode_for(0, kind, request_id, body, max)
}

/// Encodes a request of Raft group `group`: group 0's in the plain layout, any other's as a
/// `Grouped` frame (module docs).
pub fn encode_for<T: Serialize>(
    group: u32,
    kind: Kind,
    request_id: u64,
    body: &T,
    max: usize,
) -> Result<Vec<u8>, FrameError> {
    let prefix = if group == 0 { PREFIX_BYTES } else { PREFIX_BYTES + GROUPED_BYTES };
    let body_max = max.saturating_sub(prefix);
    let body_len = body_size(body, body_max).ok_or(FrameError::TooLarge { len: max + 1, max })?;
    let len = prefix + body_len;
    let mut buf = Vec::with_capacity(HEADER_BYTES + len);
    buf.extend_from_slice(&(len as u32).to_le_bytes());
    buf.extend_from_slice(&[0; 4]);
    if group == 0 {
        buf.push(kind as u8);
        buf.extend_from_slice(&request_id.to_le_bytes());
    } else {
        buf.push(Kind::Grouped as u8);
        buf.extend_from_slice(&request_id.to_le_bytes());
        buf.extend_from_slice(&group.to_le_bytes());
        buf.push(kind as u8);
    }
    bincode_options(body_len).serialize_into(&mut buf, body)?;
    let crc = crc32c::crc32c(&buf[HEADER_BYTES..]);
    buf[4..8].copy_from_slice(&crc.to_le_bytes());
    Ok(buf)
}

/// Reads one frame. `Ok(None)` is a clean close between frames; a close inside a frame is
/// `Truncated`. The length is checked against `max` before anything is allocated.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<Option<Frame>, FrameError> {
    let mut header = [0u8; HEADER_BYTES];
    let mut filled = 0;
    while filled < HEADER_BYTES {
        let n = reader.read(&mut header[filled..]).await?;
        if n == 0 {
            return if filled == 0 { Ok(None) } else { Err(FrameError::Truncated) };
        }
        filled += n;
    }
    let len = u32::from_le_bytes(header[0..4].try_into().expect("4 bytes")) as usize;
    let expected = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    if len < PREFIX_BYTES {
        return Err(FrameError::TooShort { len });
    }
    let mut buf = vec![0u8; len];
    reader.read_exact(&mut buf).await.map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => FrameError::Truncated,
        _ => FrameError::Io(e),
    })?;
    let actual = crc32c::crc32c(&buf);
    if actual != expected {
        return Err(FrameError::Crc { expected, actual });
    }
    let kind = Kind::try_from(buf[0])?;
    let request_id = u64::from_le_bytes(buf[1..PREFIX_BYTES].try_into().expect("8 bytes"));
    if kind != Kind::Grouped {
        return Ok(Some(Frame { kind, group: 0, request_id, buf, body_at: PREFIX_BYTES }));
    }
    let body_at = PREFIX_BYTES + GROUPED_BYTES;
    if len < body_at {
        return Err(FrameError::TooShort { len });
    }
    let group = u32::from_le_bytes(buf[PREFIX_BYTES..PREFIX_BYTES + 4].try_into().expect("4 bytes"));
    let inner = Kind::try_from(buf[body_at - 1])?;
    if group == 0 || matches!(inner, Kind::Hello | Kind::Grouped | Kind::Response) {
        return Err(FrameError::BadGroup(inner));
    }
    Ok(Some(Frame { kind: inner, group, request_id, buf, body_at }))
}

/// A connection's writer task: writes queued frames in order, and flushes once the queue is
/// empty, so frames that pile up under load share one syscall while a lone frame leaves at
/// once. Ends when every sender is dropped, or on the first write error.
pub async fn write_frames<W: AsyncWrite + Unpin>(
    mut queue: mpsc::Receiver<Vec<u8>>,
    writer: W,
) -> std::io::Result<()> {
    let mut writer = BufWriter::with_capacity(limits::RAFT_SOCKET_BUFFER_BYTES, writer);
    while let Some(frame) = queue.recv().await {
        writer.write_all(&frame).await?;
        while let Ok(frame) = queue.try_recv() {
            writer.write_all(&frame).await?;
        }
        writer.flush().await?;
    }
    writer.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 1024;

    async fn read(bytes: &[u8]) -> Result<Option<Frame>, FrameError> {
        read_frame(&mut &bytes[..], MAX).await
    }

    #[tokio::test]
    async fn round_trip() {
        let frame = encode(Kind::Vote, 7, &(1u64, "x".to_string()), MAX).unwrap();
        let decoded = read(&frame).await.unwrap().unwrap();
        assert_eq!((decoded.kind, decoded.request_id), (Kind::Vote, 7));
        assert_eq!(decoded.decode_body::<(u64, String)>().unwrap(), (1, "x".to_string()));
        assert!(read(&[]).await.unwrap().is_none(), "clean close between frames");
    }

    #[tokio::test]
    async fn oversized_length_is_refused_before_allocating() {
        let mut frame = encode(Kind::Vote, 1, &0u8, MAX).unwrap();
        frame[0..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = read(&frame).await.unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { len, max: MAX } if len == u32::MAX as usize), "{err}");
        // Encoding refuses what the reader would refuse.
        let err = encode(Kind::Vote, 1, &vec![0u8; MAX], MAX).unwrap_err();
        assert!(matches!(err, FrameError::TooLarge { .. }), "{err}");
    }

    #[tokio::test]
    async fn short_length_is_refused() {
        let mut frame = encode(Kind::Vote, 1, &0u8, MAX).unwrap();
        frame[0..4].copy_from_slice(&3u32.to_le_bytes());
        assert!(matches!(read(&frame).await.unwrap_err(), FrameError::TooShort { len: 3 }));
    }

    #[tokio::test]
    async fn bad_crc_is_refused() {
        let mut frame = encode(Kind::Vote, 1, &42u64, MAX).unwrap();
        *frame.last_mut().unwrap() ^= 1;
        assert!(matches!(read(&frame).await.unwrap_err(), FrameError::Crc { .. }));
    }

    #[tokio::test]
    async fn truncated_frame_is_refused() {
        let frame = encode(Kind::Vote, 1, &42u64, MAX).unwrap();
        for cut in 1..frame.len() {
            let err = read(&frame[..cut]).await.unwrap_err();
            assert!(matches!(err, FrameError::Truncated), "cut at {cut}: {err}");
        }
    }

    #[tokio::test]
    async fn unknown_kind_and_bad_body_are_errors() {
        let mut frame = encode(Kind::Vote, 1, &42u64, MAX).unwrap();
        frame[HEADER_BYTES] = 12;
        let crc = crc32c::crc32c(&frame[HEADER_BYTES..]);
        frame[4..8].copy_from_slice(&crc.to_le_bytes());
        assert!(matches!(read(&frame).await.unwrap_err(), FrameError::UnknownKind(12)));

        // A body that claims a string longer than the frame: an error, not an allocation.
        let frame = encode(Kind::Vote, 1, &u64::MAX, MAX).unwrap();
        let decoded = read(&frame).await.unwrap().unwrap();
        assert!(decoded.decode_body::<String>().is_err());
        assert!(decoded.decode_body::<u32>().is_err(), "trailing bytes are refused");
    }

    #[tokio::test]
    async fn a_grouped_frame_arrives_unwrapped_and_group_0_keeps_the_plain_layout() {
        let plain = encode(Kind::Vote, 7, &(1u64, "x".to_string()), MAX).unwrap();
        assert_eq!(encode_for(0, Kind::Vote, 7, &(1u64, "x".to_string()), MAX).unwrap(), plain);
        let grouped = encode_for(3, Kind::Vote, 7, &(1u64, "x".to_string()), MAX).unwrap();
        assert_eq!(grouped.len(), plain.len() + GROUPED_BYTES);
        assert_eq!(grouped[HEADER_BYTES], Kind::Grouped as u8);
        let decoded = read(&grouped).await.unwrap().unwrap();
        assert_eq!((decoded.kind, decoded.group, decoded.request_id), (Kind::Vote, 3, 7));
        assert_eq!(decoded.decode_body::<(u64, String)>().unwrap(), (1, "x".to_string()));
        let decoded = read(&plain).await.unwrap().unwrap();
        assert_eq!((decoded.kind, decoded.group), (Kind::Vote, 0));
    }

    /// Re-seals a hand-edited frame: the CRC over everything after the header.
    fn reseal(frame: &mut [u8]) {
        let crc = crc32c::crc32c(&frame[HEADER_BYTES..]);
        frame[4..8].copy_from_slice(&crc.to_le_bytes());
    }

    #[tokio::test]
    async fn bad_grouped_frames_are_errors() {
        let at = HEADER_BYTES + PREFIX_BYTES;
        // Group 0 must use the plain layout.
        let mut frame = encode_for(3, Kind::Vote, 1, &42u64, MAX).unwrap();
        frame[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
        reseal(&mut frame);
        assert!(matches!(read(&frame).await.unwrap_err(), FrameError::BadGroup(Kind::Vote)));
        // Nothing wraps a handshake, a response or another Grouped frame.
        for inner in [Kind::Hello, Kind::Response, Kind::Grouped] {
            let mut frame = encode_for(3, Kind::Vote, 1, &42u64, MAX).unwrap();
            frame[at + 4] = inner as u8;
            reseal(&mut frame);
            assert!(matches!(read(&frame).await.unwrap_err(), FrameError::BadGroup(k) if k == inner));
        }
        // An unknown inner kind, and a Grouped frame too short for its group and kind.
        let mut frame = encode_for(3, Kind::Vote, 1, &42u64, MAX).unwrap();
        frame[at + 4] = 0x42;
        reseal(&mut frame);
        assert!(matches!(read(&frame).await.unwrap_err(), FrameError::UnknownKind(0x42)));
        let mut short = encode(Kind::Vote, 1, &1u8, MAX).unwrap();
        short[HEADER_BYTES] = Kind::Grouped as u8;
        reseal(&mut short);
        assert!(matches!(read(&short).await.unwrap_err(), FrameError::TooShort { len: 10 }));
    }

    #[test]
    fn default_snapshot_chunk_fits_in_a_frame() {
        // openraft's chunked snapshot transport sends `snapshot_max_chunk_size` bytes of data
        // per InstallSnapshot; the request envelope is small next to the frame limit's slack.
        let chunk = openraft::Config::default().snapshot_max_chunk_size as usize;
        assert!(chunk + 1024 * 1024 <= limits::RAFT_FRAME_BYTES_MAX);
    }
}
