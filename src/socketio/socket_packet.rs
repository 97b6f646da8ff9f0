//! Socket.IO v5 packet format carried inside Engine.IO messages:
//! `<type>[<attachments>-][<namespace>,][<ack id>][JSON]`. Parsing of client
//! packets and encoding of the server's; no state, no I/O.

use std::fmt;

/// The main namespace, which is written without a `/ns,` prefix.
pub(crate) const MAIN_NAMESPACE: &str = "/";

/// Socket.IO packet types (v5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SocketPacketKind {
    Connect,
    Disconnect,
    Event,
    Ack,
    ConnectError,
    BinaryEvent,
    BinaryAck,
}

impl SocketPacketKind {
    fn digit(self) -> char {
        match self {
            SocketPacketKind::Connect => '0',
            SocketPacketKind::Disconnect => '1',
            SocketPacketKind::Event => '2',
            SocketPacketKind::Ack => '3',
            SocketPacketKind::ConnectError => '4',
            SocketPacketKind::BinaryEvent => '5',
            SocketPacketKind::BinaryAck => '6',
        }
    }
}

/// One decoded packet; `data` is the raw JSON text (possibly empty).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct SocketPacket<'a> {
    pub kind: SocketPacketKind,
    pub namespace: &'a str,
    pub ack_id: Option<u64>,
    pub data: &'a str,
}

/// A message that is not a Socket.IO v5 packet; its connection is closed.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct MalformedSocketPacket;

impl fmt::Display for MalformedSocketPacket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("malformed Socket.IO packet")
    }
}

impl<'a> SocketPacket<'a> {
    /// Parses the payload of one Engine.IO message packet.
    pub(crate) fn parse(text: &'a str) -> Result<SocketPacket<'a>, MalformedSocketPacket> {
        let kind = match text.as_bytes().first() {
            Some(b'0') => SocketPacketKind::Connect,
            Some(b'1') => SocketPacketKind::Disconnect,
            Some(b'2') => SocketPacketKind::Event,
            Some(b'3') => SocketPacketKind::Ack,
            Some(b'4') => SocketPacketKind::ConnectError,
            Some(b'5') => SocketPacketKind::BinaryEvent,
            Some(b'6') => SocketPacketKind::BinaryAck,
            _ => return Err(MalformedSocketPacket),
        };
        let mut rest = &text[1..];
        if matches!(
            kind,
            SocketPacketKind::BinaryEvent | SocketPacketKind::BinaryAck
        ) {
            // The attachment count is read only to find where the rest starts.
            let Some(dash) = rest.find('-') else {
                return Err(MalformedSocketPacket);
            };
            if dash == 0 || !rest[..dash].bytes().all(|b| b.is_ascii_digit()) {
                return Err(MalformedSocketPacket);
            }
            rest = &rest[dash + 1..];
        }
        let mut namespace = MAIN_NAMESPACE;
        if rest.starts_with('/') {
            match rest.find(',') {
                Some(comma) => {
                    namespace = &rest[..comma];
                    rest = &rest[comma + 1..];
                }
                None => {
                    namespace = rest;
                    rest = "";
                }
            }
        }
        let n_digits = rest.bytes().take_while(|b| b.is_ascii_digit()).count();
        let ack_id = if n_digits == 0 {
            None
        } else {
            match rest[..n_digits].parse::<u64>() {
                Ok(id) => Some(id),
                Err(_) => return Err(MalformedSocketPacket),
            }
        };
        Ok(SocketPacket {
            kind,
            namespace,
            ack_id,
            data: &rest[n_digits..],
        })
    }
}

/// Encodes a server packet as a complete Engine.IO message (`4` prefix
/// included), ready for a websocket frame or a polling payload.
pub(crate) fn encode_message(
    kind: SocketPacketKind,
    namespace: &str,
    ack_id: Option<u64>,
    json: &str,
) -> String {
    let mut out = String::with_capacity(2 + namespace.len() + 1 + 20 + json.len());
    out.push('4');
    out.push(kind.digit());
    if namespace != MAIN_NAMESPACE {
        out.push_str(namespace);
        out.push(',');
    }
    if let Some(id) = ack_id {
        out.push_str(&id.to_string());
    }
    out.push_str(json);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(text: &str, expected: Result<(SocketPacketKind, &str, Option<u64>, &str), ()>) {
        let got = SocketPacket::parse(text)
            .map(|p| (p.kind, p.namespace, p.ack_id, p.data))
            .map_err(|_| ());
        assert_eq!(got, expected, "{text:?}");
    }

    #[test]
    fn parses_namespaces_ack_ids_and_payloads() {
        use SocketPacketKind::*;
        check("0", Ok((Connect, "/", None, "")));
        check("0/admin,", Ok((Connect, "/admin", None, "")));
        check(
            r#"0/admin,{"token":"x"}"#,
            Ok((Connect, "/admin", None, r#"{"token":"x"}"#)),
        );
        check("1/admin,", Ok((Disconnect, "/admin", None, "")));
        check("1/admin", Ok((Disconnect, "/admin", None, "")));
        check(r#"2["hello",1]"#, Ok((Event, "/", None, r#"["hello",1]"#)));
        check(
            r#"2/admin,12["hello"]"#,
            Ok((Event, "/admin", Some(12), r#"["hello"]"#)),
        );
        check(
            r#"51-/admin,3["up",{"_placeholder":true,"num":0}]"#,
            Ok((
                BinaryEvent,
                "/admin",
                Some(3),
                r#"["up",{"_placeholder":true,"num":0}]"#,
            )),
        );
        check("", Err(()));
        check("9", Err(()));
        check("5/admin,[]", Err(()));
        check("2/a,99999999999999999999999[]", Err(()));
    }

    #[test]
    fn encodes_main_namespace_without_prefix() {
        assert_eq!(
            encode_message(SocketPacketKind::Event, "/", None, r#"["a"]"#),
            r#"42["a"]"#
        );
        assert_eq!(
            encode_message(SocketPacketKind::Ack, "/assistant", Some(7), "[1]"),
            "43/assistant,7[1]"
        );
    }
}
