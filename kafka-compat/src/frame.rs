//! Length-prefixed framing: every Kafka request and response is `[len: i32][len bytes]`.
//!
//! The length is checked against the caller's limit *before* any buffer is allocated, so a
//! hostile length prefix can never make the broker reserve memory it was not willing to spend.

use thiserror::Error;

/// Bytes in the length prefix of every frame.
pub const FRAME_PREFIX_BYTES: usize = 4;

/// Why a frame length was refused.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum FrameError {
    #[error("frame length {0} is negative or zero")]
    NonPositive(i32),
    #[error("frame length {len} exceeds the limit of {max} bytes")]
    TooLarge { len: usize, max: usize },
}

/// Validates a big-endian length prefix and returns the body length to read.
pub fn frame_body_len(prefix: [u8; FRAME_PREFIX_BYTES], max_bytes: usize) -> Result<usize, FrameError> {
    let len = i32::from_be_bytes(prefix);
    if len <= 0 {
        return Err(FrameError::NonPositive(len));
    }
    let len = len as usize;
    if len > max_bytes {
        return Err(FrameError::TooLarge { len, max: max_bytes });
    }
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_lengths_within_limit() {
        assert_eq!(frame_body_len(10i32.to_be_bytes(), 10), Ok(10));
    }

    #[test]
    fn rejects_zero_negative_and_oversized() {
        assert_eq!(frame_body_len(0i32.to_be_bytes(), 10), Err(FrameError::NonPositive(0)));
        assert_eq!(frame_body_len((-5i32).to_be_bytes(), 10), Err(FrameError::NonPositive(-5)));
        assert_eq!(
            frame_body_len(i32::MAX.to_be_bytes(), 100),
            Err(FrameError::TooLarge { len: i32::MAX as usize, max: 100 })
        );
    }
}
