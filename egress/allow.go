package egress

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// Allow is the egress allow-list: where an actor's outbound requests may
// go. Nothing is allowed but what it names. A rule is a host name
// ("api.example.com", or "*.example.com" for its subdomains), an IP
// address or a CIDR range ("10.1.0.0/16"), each with an optional port
// ("api.example.com:443", "[::1]:8080", "10.1.2.3:80"); without one, any
// port.
//
// A host name is resolved, and every address it is dialed at is checked
// when the connection is made, so what is checked is what is dialed. An
// address a name resolves to is allowed when an IP or CIDR rule covers
// it, or when a name rule matches the name and the address is a public
// one: a loopback, private, link-local, unspecified or multicast address
// needs a rule of its own, so a name cannot smuggle one past the list.
type Allow struct {
	names []nameRule
	nets  []netRule
}

type nameRule struct {
	name     string // lower case; with sub, the parent domain
	sub      bool   // "*.name": any subdomain of name, not name itself
	port     int    // 0: any
	original string
}

type netRule struct {
	prefix   netip.Prefix
	port     int
	original string
}

// ParseAllow parses the rules (see Allow). An empty list allows nothing.
func ParseAllow(rules []string) (*Allow, error) {
	a := &Allow{}
	for _, r := range rules {
		r = strings.TrimSpace(r)
		if r == "" {
			continue
		}
		if err := a.add(r); err != nil {
			return nil, fmt.Errorf("egress rule %q: %w", r, err)
		}
	}
	return a, nil
}

func (a *Allow) add(r string) error {
	host, port := r, 0
	if p, err := netip.ParsePrefix(r); err == nil {
		a.nets = append(a.nets, netRule{prefix: p.Masked(), original: r})
		return nil
	}
	if h, ps, err := net.SplitHostPort(r); err == nil {
		n, err := strconv.Atoi(ps)
		if err != nil || n < 1 || n > 65535 {
			return fmt.Errorf("port %q: want 1 to 65535", ps)
		}
		host, port = h, n
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		ip = ip.Unmap()
		a.nets = append(a.nets, netRule{prefix: netip.PrefixFrom(ip, ip.BitLen()), port: port, original: r})
		return nil
	}
	name, sub := strings.ToLower(strings.TrimSuffix(host, ".")), false
	if rest, ok := strings.CutPrefix(name, "*."); ok {
		name, sub = rest, true
	}
	if !validName(name) {
		return fmt.Errorf("not a host name, an IP address or a CIDR range")
	}
	a.names = append(a.names, nameRule{name: name, sub: sub, port: port, original: r})
	return nil
}

// validName reports whether s is a DNS host name of letters, digits,
// hyphens and dots.
func validName(s string) bool {
	if s == "" || len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Empty reports whether the list allows nothing.
func (a *Allow) Empty() bool { return a == nil || len(a.names)+len(a.nets) == 0 }

// String lists the rules as given.
func (a *Allow) String() string {
	if a.Empty() {
		return "(nothing)"
	}
	var out []string
	for _, r := range a.names {
		out = append(out, r.original)
	}
	for _, r := range a.nets {
		out = append(out, r.original)
	}
	return strings.Join(out, ",")
}

// nameAllowed reports whether a name rule matches host (lower case, no
// trailing dot) at port.
func (a *Allow) nameAllowed(host string, port int) bool {
	for _, r := range a.names {
		if r.port != 0 && r.port != port {
			continue
		}
		if r.sub && strings.HasSuffix(host, "."+r.name) || !r.sub && host == r.name {
			return true
		}
	}
	return false
}

// addrAllowed reports whether an IP or CIDR rule covers ip at port.
func (a *Allow) addrAllowed(ip netip.Addr, port int) bool {
	ip = ip.Unmap()
	for _, r := range a.nets {
		if (r.port == 0 || r.port == port) && r.prefix.Contains(ip) {
			return true
		}
	}
	return false
}

// public reports whether ip is an address a name rule may reach: not
// loopback, private, link-local, unspecified, multicast or in the shared
// address space of carrier NAT.
func public(ip netip.Addr) bool {
	ip = ip.Unmap()
	switch {
	case ip.IsLoopback(), ip.IsPrivate(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(),
		ip.IsInterfaceLocalMulticast(), ip.IsMulticast(), ip.IsUnspecified():
		return false
	case ip.Is4() && cgnat.Contains(ip):
		return false
	}
	return ip.IsGlobalUnicast()
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// mayReach reports whether a request to host (as the URL names it) at port
// may be sent at all, before any name is resolved: an IP address must be
// covered by an IP or CIDR rule; a name by a name rule, or be resolvable
// to an address that a CIDR rule covers (which the dial checks).
func (a *Allow) mayReach(host string, port int) bool {
	if ip, err := netip.ParseAddr(host); err == nil {
		return a.addrAllowed(ip, port)
	}
	return a.nameAllowed(host, port) || len(a.nets) > 0
}

// dialAllowed reports whether a connection to ip at port, for a URL that
// named host, may be made.
func (a *Allow) dialAllowed(host string, ip netip.Addr, port int) bool {
	if a.addrAllowed(ip, port) {
		return true
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return false // an address names itself: only an IP or CIDR rule allows it
	}
	return a.nameAllowed(host, port) && public(ip)
}
