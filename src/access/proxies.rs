//! The client's address behind a reverse proxy (`SERVER__TRUSTED_PROXIES`).
//! Only when the TCP peer is a trusted proxy is `X-Forwarded-For` (or, when
//! absent, `Forwarded`) read, and then the rightmost hop that is not itself a
//! trusted proxy is the client: every hop to its left was written by a party
//! nobody vouches for. The per-IP Socket.IO cap and the access log use it.

use std::net::{IpAddr, SocketAddr};

use actix_web::http::header::HeaderMap;
use actix_web::{web, HttpRequest};

/// One `address/prefix` block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    network: IpAddr,
    prefix: u8,
}

impl Cidr {
    /// `10.0.0.0/8`, `::1/128`, or a bare address (a block of one).
    pub fn parse(text: &str) -> Result<Cidr, String> {
        let text = text.trim();
        let (address, prefix) = match text.split_once('/') {
            Some((address, prefix)) => (address, Some(prefix)),
            None => (text, None),
        };
        let network: IpAddr = address
            .parse()
            .map_err(|_| format!("{text:?} is not an IP address or CIDR block"))?;
        let network = network.to_canonical();
        let max = if network.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(prefix) => match prefix.parse::<u8>() {
                Ok(prefix) if prefix <= max => prefix,
                _ => return Err(format!("{text:?}: the prefix must be 0 to {max}")),
            },
        };
        Ok(Cidr { network, prefix })
    }

    pub fn contains(&self, address: IpAddr) -> bool {
        match (self.network, address.to_canonical()) {
            (IpAddr::V4(network), IpAddr::V4(address)) => {
                let mask = u32::MAX
                    .checked_shl(32 - u32::from(self.prefix))
                    .unwrap_or(0);
                u32::from(network) & mask == u32::from(address) & mask
            }
            (IpAddr::V6(network), IpAddr::V6(address)) => {
                let mask = u128::MAX
                    .checked_shl(128 - u32::from(self.prefix))
                    .unwrap_or(0);
                u128::from(network) & mask == u128::from(address) & mask
            }
            _ => false,
        }
    }
}

/// The proxies whose forwarding headers are believed; empty by default, so
/// nothing a client writes in a header changes its address.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TrustedProxies {
    blocks: Vec<Cidr>,
}

impl TrustedProxies {
    /// A comma-separated list of blocks; empty text trusts no one.
    pub fn parse(text: &str) -> Result<TrustedProxies, String> {
        let blocks = text
            .split(',')
            .filter(|item| !item.trim().is_empty())
            .map(Cidr::parse)
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TrustedProxies { blocks })
    }

    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    fn trusts(&self, address: IpAddr) -> bool {
        self.blocks.iter().any(|block| block.contains(address))
    }

    /// The client's address for a request from `peer` carrying `headers`.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        let peer = peer.to_canonical();
        if !self.trusts(peer) {
            return peer;
        }
        let hops = forwarded_hops(headers);
        // From the right: the nearest hop first. A hop that does not parse
        // ("unknown", an obfuscated name) ends the walk at the last proxy
        // that vouched for it.
        let mut client = peer;
        for hop in hops.iter().rev() {
            let Some(address) = hop else {
                return client;
            };
            client = address.to_canonical();
            if !self.trusts(client) {
                return client;
            }
        }
        client
    }
}

/// The address the runtime counts and logs `request` under: its TCP peer,
/// or the forwarded client when that peer is a trusted proxy.
pub fn client_ip(request: &HttpRequest) -> Option<IpAddr> {
    let peer = request.peer_addr()?.ip();
    Some(match request.app_data::<web::Data<TrustedProxies>>() {
        Some(proxies) if !proxies.is_empty() => proxies.client(peer, request.headers()),
        _ => peer.to_canonical(),
    })
}

/// The hops of `X-Forwarded-For`, else of `Forwarded`, left to right
/// (`None` for a hop that is not an address). `X-Forwarded-For` wins because
/// it is the header proxies append to (nginx's `$proxy_add_x_forwarded_for`);
/// a `Forwarded` the proxy passes through untouched is the client's own text.
fn forwarded_hops(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let x_forwarded_for: Vec<&str> = headers
        .get_all("x-forwarded-for")
        .filter_map(|value| value.to_str().ok())
        .collect();
    if !x_forwarded_for.is_empty() {
        return x_forwarded_for
            .iter()
            .flat_map(|value| value.split(','))
            .map(|hop| parse_hop(hop.trim()))
            .collect();
    }
    headers
        .get_all("forwarded")
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .map(|element| {
            element
                .split(';')
                .filter_map(|pair| pair.split_once('='))
                .find(|(key, _)| key.trim().eq_ignore_ascii_case("for"))
                .and_then(|(_, value)| parse_hop(value.trim().trim_matches('"')))
        })
        .collect()
}

/// `192.0.2.1`, `192.0.2.1:4711`, `2001:db8::1` or `[2001:db8::1]:4711`.
fn parse_hop(text: &str) -> Option<IpAddr> {
    if let Ok(address) = text.parse::<IpAddr>() {
        return Some(address);
    }
    if let Ok(socket) = text.parse::<SocketAddr>() {
        return Some(socket.ip());
    }
    text.strip_prefix('[')
        .and_then(|rest| rest.strip_suffix(']'))
        .and_then(|inner| inner.parse().ok())
}

#[cfg(test)]
mod tests {
    use actix_web::http::header::{HeaderName, HeaderValue};

    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        map
    }

    fn check(trusted: &str, peer: &str, pairs: &[(&str, &str)], expected: &str) {
        let proxies = TrustedProxies::parse(trusted).unwrap();
        let client = proxies.client(peer.parse().unwrap(), &headers(pairs));
        assert_eq!(client, expected.parse::<IpAddr>().unwrap(), "{pairs:?}");
    }

    #[test]
    fn an_untrusted_peer_is_the_client_whatever_it_forwards() {
        check(
            "",
            "203.0.113.9",
            &[("x-forwarded-for", "10.9.9.9")],
            "203.0.113.9",
        );
        check(
            "127.0.0.1",
            "203.0.113.9",
            &[("x-forwarded-for", "10.9.9.9")],
            "203.0.113.9",
        );
    }

    #[test]
    fn the_rightmost_untrusted_hop_is_the_client() {
        let trusted = "127.0.0.0/8, 10.0.0.0/8";
        check(trusted, "127.0.0.1", &[], "127.0.0.1");
        check(
            trusted,
            "127.0.0.1",
            &[("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.1.2.3")],
            "198.51.100.7",
        );
        check(
            trusted,
            "127.0.0.1",
            &[
                ("x-forwarded-for", "6.6.6.6"),
                ("x-forwarded-for", "198.51.100.7"),
            ],
            "198.51.100.7",
        );
        check(
            trusted,
            "127.0.0.1",
            &[("x-forwarded-for", "10.0.0.5")],
            "10.0.0.5",
        );
        check(
            trusted,
            "127.0.0.1",
            &[("x-forwarded-for", "6.6.6.6, unknown")],
            "127.0.0.1",
        );
    }

    #[test]
    fn forwarded_is_read_only_without_x_forwarded_for() {
        let trusted = "127.0.0.1";
        check(
            trusted,
            "127.0.0.1",
            &[(
                "forwarded",
                "for=6.6.6.6, for=\"[2001:db8::7]:4711\";proto=https",
            )],
            "2001:db8::7",
        );
        check(
            trusted,
            "127.0.0.1",
            &[
                ("forwarded", "for=6.6.6.6"),
                ("x-forwarded-for", "198.51.100.7"),
            ],
            "198.51.100.7",
        );
    }

    #[test]
    fn blocks_are_parsed_and_bad_ones_named() {
        assert!(Cidr::parse("10.0.0.0/8")
            .unwrap()
            .contains("10.255.0.1".parse().unwrap()));
        assert!(!Cidr::parse("10.0.0.0/8")
            .unwrap()
            .contains("11.0.0.1".parse().unwrap()));
        assert!(Cidr::parse("::/0")
            .unwrap()
            .contains("2001:db8::1".parse().unwrap()));
        assert!(Cidr::parse("127.0.0.1")
            .unwrap()
            .contains("::ffff:127.0.0.1".parse().unwrap()));
        assert!(Cidr::parse("0.0.0.0/0")
            .unwrap()
            .contains("1.2.3.4".parse().unwrap()));
        assert!(TrustedProxies::parse("10.0.0.0/33")
            .unwrap_err()
            .contains("10.0.0.0/33"));
        assert!(TrustedProxies::parse("proxy.local")
            .unwrap_err()
            .contains("proxy.local"));
        assert!(TrustedProxies::parse("").unwrap().is_empty());
    }
}
