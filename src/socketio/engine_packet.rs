//! Engine.IO v4 wire format: parsing the packets a client sends, the few
//! packets the server writes, and the JSON errors of the HTTP handshake.
//! Pure functions only; the connection actor decides what a packet means.

use std::fmt;
use std::time::Duration;

use actix_web::http::StatusCode;
use actix_web::HttpResponse;

/// Separator of packets in one polling payload (ASCII record separator).
pub(crate) const RECORD_SEPARATOR: char = '\x1e';
/// Server ping (v4: the server pings, the client answers `3`).
pub(crate) const PING: &str = "2";
/// Answer to the client's `2probe` on a websocket being tested for upgrade.
pub(crate) const PONG_PROBE: &str = "3probe";
/// Finishes a pending long-poll so the client can pause polling and upgrade.
pub(crate) const NOOP: &str = "6";
/// Tells a client the session is over.
pub(crate) const CLOSE: &str = "1";
/// Engine.IO protocol revision this server speaks.
pub(crate) const PROTOCOL_VERSION: &str = "4";

/// A packet received from a client, borrowing from the frame or body it came in.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EnginePacket<'a> {
    Close,
    Ping(&'a str),
    Pong(&'a str),
    Message(&'a str),
    /// A binary message (`b<base64>` on polling, a binary frame on websocket).
    /// Socket.IO binary attachments are not supported, so it is not decoded.
    Binary,
    Upgrade,
    Noop,
}

/// A text packet that is not Engine.IO v4; the connection that sent it is closed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MalformedPacket;

impl fmt::Display for MalformedPacket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("malformed Engine.IO packet")
    }
}

impl<'a> EnginePacket<'a> {
    /// Parses one text packet (one websocket text frame, or one record of a
    /// polling payload).
    pub(crate) fn parse(text: &'a str) -> Result<EnginePacket<'a>, MalformedPacket> {
        let mut chars = text.chars();
        let Some(kind) = chars.next() else {
            return Err(MalformedPacket);
        };
        let data = chars.as_str();
        match kind {
            '1' => Ok(EnginePacket::Close),
            '2' => Ok(EnginePacket::Ping(data)),
            '3' => Ok(EnginePacket::Pong(data)),
            '4' => Ok(EnginePacket::Message(data)),
            '5' => Ok(EnginePacket::Upgrade),
            '6' => Ok(EnginePacket::Noop),
            'b' => Ok(EnginePacket::Binary),
            _ => Err(MalformedPacket),
        }
    }
}

/// The `0{...}` open packet that starts a session.
pub(crate) fn open_packet(
    sid: &str,
    upgrades: &[&str],
    ping_interval: Duration,
    ping_timeout: Duration,
    max_payload: usize,
) -> String {
    let handshake = serde_json::json!({
        "sid": sid,
        "upgrades": upgrades,
        "pingInterval": ping_interval.as_millis() as u64,
        "pingTimeout": ping_timeout.as_millis() as u64,
        "maxPayload": max_payload,
    });
    format!("0{handshake}")
}

/// The errors Engine.IO answers on its HTTP endpoint, with its numeric codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum EngineError {
    TransportUnknown,
    SessionIdUnknown,
    BadHandshakeMethod,
    BadRequest,
    Forbidden,
    UnsupportedProtocolVersion,
}

impl EngineError {
    fn code(self) -> u8 {
        match self {
            EngineError::TransportUnknown => 0,
            EngineError::SessionIdUnknown => 1,
            EngineError::BadHandshakeMethod => 2,
            EngineError::BadRequest => 3,
            EngineError::Forbidden => 4,
            EngineError::UnsupportedProtocolVersion => 5,
        }
    }

    fn message(self) -> &'static str {
        match self {
            EngineError::TransportUnknown => "Transport unknown",
            EngineError::SessionIdUnknown => "Session ID unknown",
            EngineError::BadHandshakeMethod => "Bad handshake method",
            EngineError::BadRequest => "Bad request",
            EngineError::Forbidden => "Forbidden",
            EngineError::UnsupportedProtocolVersion => "Unsupported protocol version",
        }
    }

    /// `{"code":N,"message":"..."}` with 400 (403 for a refused origin), as the
    /// reference server answers.
    pub(crate) fn response(self) -> HttpResponse {
        let status = match self {
            EngineError::Forbidden => StatusCode::FORBIDDEN,
            _ => StatusCode::BAD_REQUEST,
        };
        HttpResponse::build(status).json(serde_json::json!({
            "code": self.code(),
            "message": self.message(),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_client_packet_type() {
        let cases = [
            ("1", Ok(EnginePacket::Close)),
            ("2probe", Ok(EnginePacket::Ping("probe"))),
            ("3", Ok(EnginePacket::Pong(""))),
            ("42[\"a\"]", Ok(EnginePacket::Message("2[\"a\"]"))),
            ("5", Ok(EnginePacket::Upgrade)),
            ("6", Ok(EnginePacket::Noop)),
            ("bAQID", Ok(EnginePacket::Binary)),
            ("", Err(MalformedPacket)),
            ("0{}", Err(MalformedPacket)),
            ("x", Err(MalformedPacket)),
        ];
        for (text, expected) in cases {
            assert_eq!(EnginePacket::parse(text), expected, "{text:?}");
        }
    }

    #[test]
    fn open_packet_carries_the_handshake_fields() {
        let packet = open_packet(
            "abc",
            &["websocket"],
            Duration::from_millis(25_000),
            Duration::from_millis(20_000),
            1_000_000,
        );
        assert_eq!(
            packet,
            r#"0{"sid":"abc","upgrades":["websocket"],"pingInterval":25000,"pingTimeout":20000,"maxPayload":1000000}"#
        );
    }
}
