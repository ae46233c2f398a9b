//! Produce v0–v2: advertised (older librdkafka disables compression otherwise, DESIGN §6) but
//! not served, and gone from `kafka-protocol` 0.18, which can neither decode the request nor
//! encode the response. This reads just enough of the request (acks, topics, partitions) to
//! answer every partition UNSUPPORTED_VERSION in the request's own version, instead of closing
//! the connection: a client that sent it learns why (v0: [name [partition error offset]];
//! v1 adds throttle time; v2 adds the log append time).

use bytes::{Buf, BufMut, Bytes, BytesMut};

use crate::error_code;

/// The highest Produce version answered here; v3 onward goes through `kafka-protocol`.
pub const LEGACY_PRODUCE_VERSION_MAX: i16 = 2;

/// Kafka's "no offset" / "no time" in a produce answer.
const NO_OFFSET: i64 = -1;

/// Answers a Produce v0–v2 request frame (header v1 + body, no length prefix) with
/// UNSUPPORTED_VERSION for each of its partitions, as a length-prefixed response frame.
/// `None` for acks=0, which wants no response. Fails on a frame that does not parse.
pub fn unsupported_version_response(frame: &[u8]) -> Result<Option<Bytes>, String> {
    let mut buf = frame;
    let _api_key = take_i16(&mut buf)?;
    let version = take_i16(&mut buf)?;
    if !(0..=LEGACY_PRODUCE_VERSION_MAX).contains(&version) {
        return Err(format!("Produce v{version} is not a legacy version"));
    }
    let correlation_id = take_i32(&mut buf)?;
    let _client_id = take_nullable_bytes(&mut buf, 2)?;
    let acks = take_i16(&mut buf)?;
    let _timeout_ms = take_i32(&mut buf)?;
    let mut topics = Vec::new();
    for _ in 0..take_count(&mut buf, 6)? {
        let name = take_nullable_bytes(&mut buf, 2)?.unwrap_or_default();
        let mut partitions = Vec::new();
        for _ in 0..take_count(&mut buf, 8)? {
            partitions.push(take_i32(&mut buf)?);
            let _records = take_nullable_bytes(&mut buf, 4)?;
        }
        topics.push((name, partitions));
    }
    if acks == 0 {
        return Ok(None);
    }
    let mut out = BytesMut::new();
    out.put_i32(0);
    out.put_i32(correlation_id);
    out.put_i32(topics.len() as i32);
    for (name, partitions) in &topics {
        out.put_i16(name.len() as i16);
        out.put_slice(name);
        out.put_i32(partitions.len() as i32);
        for partition in partitions {
            out.put_i32(*partition);
            out.put_i16(error_code::UNSUPPORTED_VERSION);
            out.put_i64(NO_OFFSET);
            if version >= 2 {
                out.put_i64(NO_OFFSET); // log_append_time_ms
            }
        }
    }
    if version >= 1 {
        out.put_i32(0); // throttle_time_ms
    }
    let len = (out.len() - 4) as i32;
    out[0..4].copy_from_slice(&len.to_be_bytes());
    Ok(Some(out.freeze()))
}

fn need(buf: &[u8], n: usize) -> Result<(), String> {
    if buf.remaining() < n {
        return Err(format!("truncated Produce request: {} bytes left, {n} needed", buf.remaining()));
    }
    Ok(())
}

fn take_i16(buf: &mut &[u8]) -> Result<i16, String> {
    need(buf, 2)?;
    Ok(buf.get_i16())
}

fn take_i32(buf: &mut &[u8]) -> Result<i32, String> {
    need(buf, 4)?;
    Ok(buf.get_i32())
}

/// An array length; each element takes at least `element_bytes_min`, so a length the rest of
/// the frame cannot hold is refused before anything is allocated.
fn take_count(buf: &mut &[u8], element_bytes_min: usize) -> Result<usize, String> {
    let count = take_i32(buf)?;
    let count = usize::try_from(count).map_err(|_| format!("negative array length {count}"))?;
    need(buf, count.saturating_mul(element_bytes_min))?;
    Ok(count)
}

/// A string (`len_bytes` = 2) or bytes (4) field; a negative length is null.
fn take_nullable_bytes(buf: &mut &[u8], len_bytes: usize) -> Result<Option<Vec<u8>>, String> {
    let len = if len_bytes == 2 { i32::from(take_i16(buf)?) } else { take_i32(buf)? };
    let Ok(len) = usize::try_from(len) else { return Ok(None) };
    need(buf, len)?;
    let bytes = buf[..len].to_vec();
    buf.advance(len);
    Ok(Some(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(version: i16, acks: i16) -> Vec<u8> {
        let mut b = BytesMut::new();
        b.put_i16(0);
        b.put_i16(version);
        b.put_i32(7);
        b.put_i16(1);
        b.put_slice(b"c");
        b.put_i16(acks);
        b.put_i32(1000);
        b.put_i32(1);
        b.put_i16(1);
        b.put_slice(b"t");
        b.put_i32(1);
        b.put_i32(3);
        b.put_i32(2);
        b.put_slice(b"xy");
        b.to_vec()
    }

    #[test]
    fn every_partition_is_answered_unsupported_version() {
        let frame = unsupported_version_response(&request(2, -1)).unwrap().unwrap();
        let mut b = &frame[4..];
        assert_eq!(b.get_i32(), 7);
        assert_eq!(b.get_i32(), 1);
        assert_eq!(b.get_i16(), 1);
        assert_eq!(b.get_u8(), b't');
        assert_eq!(b.get_i32(), 1);
        assert_eq!(b.get_i32(), 3);
        assert_eq!(b.get_i16(), error_code::UNSUPPORTED_VERSION);
        assert_eq!((b.get_i64(), b.get_i64(), b.get_i32()), (-1, -1, 0));
        assert!(b.is_empty());
    }

    #[test]
    fn acks_zero_wants_no_answer_and_garbage_is_refused() {
        assert_eq!(unsupported_version_response(&request(0, 0)).unwrap(), None);
        let mut truncated = request(1, 1);
        truncated.truncate(truncated.len() - 1);
        assert!(unsupported_version_response(&truncated).is_err());
        assert!(unsupported_version_response(&request(3, 1)).is_err());
    }
}
