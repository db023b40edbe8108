//! Which addresses network sources may reach (docs/CONTRACT.md §10).
//!
//! By default only public unicast addresses. Loopback, private, link-local,
//! CGNAT, unique-local, IPv4-mapped/-translated, unspecified, multicast,
//! broadcast, documentation and cloud-metadata addresses are refused unless a
//! CIDR block of `[network] allow` in `config.toml` contains them. Only the
//! configuration file can allow them: no flag or tool call can.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// The allow-list from the configuration.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NetPolicy {
    allow: Vec<IpNet>,
}

/// A malformed allow-list entry.
#[derive(Debug, thiserror::Error)]
#[error("[network] allow entry `{0}` is not a CIDR block such as \"127.0.0.0/8\" or \"::1/128\"")]
pub struct PolicyError(pub String);

impl NetPolicy {
    /// A policy allowing the given CIDR blocks besides public addresses.
    pub fn new(allow: &[String]) -> Result<Self, PolicyError> {
        let allow = allow
            .iter()
            .map(|s| s.parse::<IpNet>().map_err(|_| PolicyError(s.clone())))
            .collect::<Result<_, _>>()?;
        Ok(NetPolicy { allow })
    }

    /// `None` when `ip` may be reached; otherwise why not.
    pub fn refusal(&self, ip: IpAddr) -> Option<&'static str> {
        let why = non_public(ip)?;
        if self.allow.iter().any(|net| net.contains(&ip)) {
            None
        } else {
            Some(why)
        }
    }
}

/// Why `ip` is not a public unicast address, if it is not.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let o = ip.octets();
    if ip.is_unspecified() || o[0] == 0 {
        Some("unspecified (0.0.0.0/8)")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if ip.is_private() {
        Some("private (RFC 1918)")
    } else if o[0] == 169 && o[1] == 254 {
        Some("link-local (including the 169.254.169.254 cloud metadata service)")
    } else if o[0] == 100 && (64..128).contains(&o[1]) {
        Some("carrier-grade NAT (100.64.0.0/10)")
    } else if ip.is_multicast() || o[0] >= 240 {
        Some("multicast, reserved or broadcast")
    } else if ip.is_documentation() || (o[0] == 198 && (o[1] == 18 || o[1] == 19)) {
        Some("documentation or benchmarking range")
    } else if o[0] == 192 && o[1] == 0 && o[2] == 0 {
        Some("IETF protocol assignments (192.0.0.0/24)")
    } else {
        None
    }
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let seg = ip.segments();
    if let Some(v4) = ip.to_ipv4_mapped() {
        return non_public_v4(v4).map(|_| "IPv4-mapped non-public address");
    }
    if ip.is_unspecified() {
        Some("unspecified (::)")
    } else if ip.is_loopback() {
        Some("loopback")
    } else if (seg[0] & 0xfe00) == 0xfc00 {
        Some("unique-local (fc00::/7, including fd00:ec2::254 cloud metadata)")
    } else if (seg[0] & 0xffc0) == 0xfe80 {
        Some("link-local (fe80::/10)")
    } else if ip.is_multicast() {
        Some("multicast")
    } else if seg[0] == 0x64 && seg[1] == 0xff9b {
        Some("IPv4-translated (64:ff9b::/96)")
    } else if seg[0] == 0x2001 && seg[1] == 0x0db8 {
        Some("documentation (2001:db8::/32)")
    } else if seg[0] == 0 && seg[1] == 0 && seg[2] == 0 && seg[3] == 0 && seg[4] == 0 && seg[5] == 0
    {
        Some("IPv4-compatible (::/96)")
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn refuses_non_public_by_default() {
        let p = NetPolicy::default();
        for bad in [
            "127.0.0.1",
            "10.1.2.3",
            "172.16.0.1",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "100.100.100.200",
            "0.0.0.0",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "fc00::1",
            "::ffff:127.0.0.1",
            "::ffff:10.0.0.1",
            "64:ff9b::a00:1",
        ] {
            assert!(p.refusal(ip(bad)).is_some(), "{bad} should be refused");
        }
        for good in [
            "93.184.216.34",
            "1.1.1.1",
            "2606:4700:4700::1111",
            "::ffff:1.1.1.1",
        ] {
            assert_eq!(p.refusal(ip(good)), None, "{good}");
        }
    }

    #[test]
    fn allow_list_opens_exactly_its_blocks() {
        let p = NetPolicy::new(&["127.0.0.0/8".into(), "::1/128".into()]).unwrap();
        assert_eq!(p.refusal(ip("127.0.0.1")), None);
        assert_eq!(p.refusal(ip("::1")), None);
        assert!(p.refusal(ip("10.0.0.1")).is_some());
        assert!(NetPolicy::new(&["localhost".into()]).is_err());
    }
}
