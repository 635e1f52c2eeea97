package natslink

import (
	"errors"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/bcmsync/bcmsync/sync/distributed"
	"github.com/nats-io/nats.go"
)

// The embedded server listens on the loopback interface only, on no other
// port (monitoring, cluster, gateway, profiler), and lets in only clients
// that have its token.
func TestEmbeddedNATSLoopbackOnly(t *testing.T) {
	s, token, err := embedded()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown()
	addr, ok := s.Addr().(*net.TCPAddr)
	if !ok || !addr.IP.IsLoopback() {
		t.Fatalf("listening on %v, want the loopback interface", s.Addr())
	}
	if s.MonitorAddr() != nil || s.ClusterAddr() != nil || s.GatewayAddr() != nil || s.ProfilerAddr() != nil {
		t.Errorf("other ports open: monitor %v cluster %v gateway %v profiler %v", s.MonitorAddr(), s.ClusterAddr(), s.GatewayAddr(), s.ProfilerAddr())
	}
	// Through any other address of this machine, nothing answers.
	ifaces, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	tried := 0
	for _, a := range ifaces {
		ipn, ok := a.(*net.IPNet)
		if !ok || ipn.IP.IsLoopback() || ipn.IP.IsLinkLocalUnicast() {
			continue
		}
		tried++
		if c, err := net.Dial("tcp", net.JoinHostPort(ipn.IP.String(), strconv.Itoa(addr.Port))); err == nil {
			c.Close()
			t.Errorf("the embedded server answers on %v", ipn.IP)
		}
	}
	t.Logf("listening on %v; %d other addresses refused", addr, tried)
	if nc, err := nats.Connect(s.ClientURL()); err == nil {
		nc.Close()
		t.Error("connected without the token")
	}
	nc, err := nats.Connect(s.ClientURL(), nats.Token(token))
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	nc.Close()
}

// Serve's URL and token are what Dial needs: with the token a client
// connects; without it, the error says which flags to check; a credential
// file that cannot be read is a FileError naming it, before any
// connection.
func TestServeAndDial(t *testing.T) {
	url, token, stop, err := Serve()
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	bus, closeBus, err := Dial(url, "test", distributed.NATSSecurity{Token: token})
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	if err := bus.Publish("test.subject", []byte("x")); err != nil {
		t.Error(err)
	}
	closeBus()
	if _, _, err := Dial(url, "intruder", distributed.NATSSecurity{}); err == nil || !errors.Is(err, nats.ErrAuthorization) || !strings.Contains(err.Error(), "check --creds") {
		t.Errorf("without the token: %v", err)
	}
	missing := filepath.Join(t.TempDir(), "missing.nk")
	var fe *distributed.FileError
	if _, _, err := Dial(url, "agent", distributed.NATSSecurity{NkeySeed: missing}); !errors.As(err, &fe) || fe.Field != "NkeySeed" || fe.File != missing {
		t.Errorf("a missing nkey seed: %v", err)
	}
}
