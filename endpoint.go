package actorflow

import (
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// The query endpoint (WithQueryEndpoint) travels in the group consumer's
// client.id, as "<client.id>;query=<host:port>", because it is the one
// member attribute that every member can read back under both group
// protocols the worker supports: the group coordinator stores the client.id
// of each member's join (classic JoinGroup, KIP-848 ConsumerGroupHeartbeat
// request headers) and returns it per member in DescribeGroups and in
// ConsumerGroupDescribe, which is where Get already finds a partition's
// owner. The alternatives each fail one protocol or change behaviour:
//   - the classic subscription's user data (Kafka Streams'
//     application.server rides there) belongs to kgo's cooperative-sticky
//     balancer, which encodes its own owned-partitions data in it, and
//     KIP-848 has no user data at all (the assignment is computed by the
//     broker);
//   - group.instance.id (static membership) would change membership
//     itself: a static member's departure is not seen before the session
//     timeout, and two members with one id fence each other;
//   - client.rack drives rack-aware assignment and follower fetching, and
//     DescribeGroups does not return it.
//
// Brokers put no restriction on a client.id's characters (it is a request
// header string; quota entity names and JMX tags are sanitized), but the
// endpoint is validated anyway (checkEndpoint) so that what the other
// members parse back is exactly a routable host:port.
const queryEndpointMarker = ";query="

// maxEndpointLen bounds an advertised endpoint: a DNS name (253) and a port.
const maxEndpointLen = 253 + len(":65535")

// withEndpoint is the consumer's client.id advertising endpoint.
func withEndpoint(clientID, endpoint string) string { return clientID + queryEndpointMarker + endpoint }

// endpointOf is the query endpoint a member's client.id advertises, "" if
// none: the text after the last marker, if it is a valid endpoint (a
// client.id of its own that happens to contain the marker advertises
// nothing unless what follows is a host:port).
func endpointOf(clientID string) string {
	i := strings.LastIndex(clientID, queryEndpointMarker)
	if i < 0 {
		return ""
	}
	ep := clientID[i+len(queryEndpointMarker):]
	if checkEndpoint(ep) != nil {
		return ""
	}
	return ep
}

// checkEndpoint accepts a host:port the other members can dial: a DNS name
// or an IP literal (IPv6 in brackets), not an unspecified or zoned address,
// and a port 1-65535.
func checkEndpoint(addr string) error {
	if len(addr) > maxEndpointLen {
		return fmt.Errorf("%d bytes, at most %d", len(addr), maxEndpointLen)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("want host:port: %w", err)
	}
	if p, err := strconv.ParseUint(port, 10, 16); err != nil || p == 0 {
		return fmt.Errorf("port %q: want 1-65535", port)
	}
	if host == "" {
		return fmt.Errorf("no host: advertise an address the other members can reach, not a listen address like %q", addr)
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		switch {
		case ip.IsUnspecified():
			return fmt.Errorf("%s is the unspecified address (a listen address): advertise one the other members can reach", host)
		case ip.Zone() != "":
			return fmt.Errorf("%s is zoned: meaningful on this host only", host)
		}
		return nil
	}
	for _, label := range strings.Split(host, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("host %q: not an IP address or a DNS name (empty or long label)", host)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("host %q: not an IP address or a DNS name (character %q)", host, r)
			}
		}
	}
	return nil
}
