package testenv

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"golang.org/x/net/dns/dnsmessage"
)

// DNSServer is a tiny authoritative DNS server over UDP for tests: it
// answers A queries for the names it is given, NOERROR with no answer for
// other types of those names (AAAA), and NXDOMAIN for any other name. It
// records every question it gets. Pods resolve through it when actorlet
// runs with --cluster-dns <its IP> (resolvers ask port 53).
type DNSServer struct {
	Addr *net.UDPAddr // where it listens

	conn    *net.UDPConn
	records map[string]netip.Addr // lower-case FQDN with the trailing dot
	mu      sync.Mutex
	asked   []string // "A myservice.default.svc.cluster.local."
	done    chan struct{}
}

// StartDNSServer serves records (name -> IPv4; names with or without the
// trailing dot) on addr ("192.0.2.2:53", ":0" for tests of the server
// itself) until the test ends. A bad record or an address it cannot listen
// on fails the test.
func StartDNSServer(t testing.TB, addr string, records map[string]string) *DNSServer {
	t.Helper()
	s, err := NewDNSServer(addr, records)
	if err != nil {
		t.Fatalf("dns server: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// NewDNSServer is StartDNSServer returning the error; Close stops it.
func NewDNSServer(addr string, records map[string]string) (*DNSServer, error) {
	recs := make(map[string]netip.Addr, len(records))
	for name, ip := range records {
		a, err := netip.ParseAddr(ip)
		if err != nil || !a.Is4() {
			return nil, fmt.Errorf("record %s: %q is not an IPv4 address", name, ip)
		}
		recs[fqdn(name)] = a
	}
	ua, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, err
	}
	conn, err := net.ListenUDP("udp", ua)
	if err != nil {
		return nil, err
	}
	s := &DNSServer{Addr: conn.LocalAddr().(*net.UDPAddr), conn: conn, records: recs, done: make(chan struct{})}
	go s.serve()
	return s, nil
}

// Close stops the server and waits for it.
func (s *DNSServer) Close() {
	_ = s.conn.Close()
	<-s.done
}

// Asked returns the questions received so far, as "TYPE name." (e.g.
// "A myservice.default.svc.cluster.local.").
func (s *DNSServer) Asked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.asked...)
}

func fqdn(name string) string {
	name = strings.ToLower(name)
	if !strings.HasSuffix(name, ".") {
		name += "."
	}
	return name
}

func (s *DNSServer) serve() {
	defer close(s.done)
	buf := make([]byte, 1500)
	for {
		n, from, err := s.conn.ReadFromUDP(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		resp, ok := s.answer(buf[:n])
		if !ok {
			continue // not a query we can parse: dropped, as servers do
		}
		_, _ = s.conn.WriteToUDP(resp, from)
	}
}

// answer builds the response to one query message.
func (s *DNSServer) answer(query []byte) ([]byte, bool) {
	var p dnsmessage.Parser
	h, err := p.Start(query)
	if err != nil || h.Response {
		return nil, false
	}
	q, err := p.Question()
	if err != nil {
		return nil, false
	}
	name := strings.ToLower(q.Name.String())
	s.mu.Lock()
	s.asked = append(s.asked, strings.TrimPrefix(q.Type.String(), "Type")+" "+name)
	s.mu.Unlock()

	rh := dnsmessage.Header{ID: h.ID, Response: true, Authoritative: true, RecursionDesired: h.RecursionDesired, OpCode: h.OpCode}
	ip, known := s.records[name]
	if !known {
		rh.RCode = dnsmessage.RCodeNameError
	}
	b := dnsmessage.NewBuilder(nil, rh)
	b.EnableCompression()
	if err := b.StartQuestions(); err != nil {
		return nil, false
	}
	if err := b.Question(q); err != nil {
		return nil, false
	}
	if known && q.Type == dnsmessage.TypeA && q.Class == dnsmessage.ClassINET {
		if err := b.StartAnswers(); err != nil {
			return nil, false
		}
		rr := dnsmessage.ResourceHeader{Name: q.Name, Type: dnsmessage.TypeA, Class: dnsmessage.ClassINET, TTL: 30}
		if err := b.AResource(rr, dnsmessage.AResource{A: ip.As4()}); err != nil {
			return nil, false
		}
	}
	resp, err := b.Finish()
	return resp, err == nil
}

// PodReachableIP is an address of this host that pods on a CNI bridge
// reach through their gateway: the first IPv4 address of an interface that
// is up, not loopback and not a bridge or veth of pods (names starting
// with actorlet, cni, veth, docker, br-). "" when there is none.
func PodReachableIP() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifc := range ifs {
		if ifc.Flags&net.FlagUp == 0 || ifc.Flags&net.FlagLoopback != 0 {
			continue
		}
		skip := false
		for _, p := range []string{"actorlet", "cni", "veth", "docker", "br-"} {
			skip = skip || strings.HasPrefix(ifc.Name, p)
		}
		if skip {
			continue
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if n, ok := a.(*net.IPNet); ok && n.IP.To4() != nil && !n.IP.IsLinkLocalUnicast() {
				return n.IP.String()
			}
		}
	}
	return ""
}
