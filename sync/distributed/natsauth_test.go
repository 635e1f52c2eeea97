package distributed_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/internal/natstest"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/bcmsync/bcmsync/sync/distributed"
	"github.com/bcmsync/bcmsync/sync/distributed/natsbus"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// natsRun solves g over the NATS server at url with the coordinator and
// each agent on its own connection, signed in with coord and agent(k), and
// checks the result against central.
func natsRun(t *testing.T, url string, g *posegraph.Graph, p *distributed.Partition, central *bsync.Result, coord distributed.NATSSecurity, agent func(k int) distributed.NATSSecurity, opts distributed.Options) *distributed.Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, p.K)
	for k := 0; k < p.K; k++ {
		sec := agent(k)
		bus, err := natsbus.DialSecure(url, "agent", &sec)
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer bus.Close()
			errs <- distributed.RunAgent(ctx, bus, g, p, k, distributed.AgentOptions{Key: opts.Key, Logger: distributed.TestLogger(t)})
		}()
	}
	bus, err := natsbus.DialSecure(url, "coordinator", &coord)
	if err != nil {
		t.Fatal(err)
	}
	res, st, err := distributed.Solve(ctx, bus, g, p, opts)
	bus.Close()
	if err != nil {
		t.Fatal(err)
	}
	for k := 0; k < p.K; k++ {
		if err := <-errs; err != nil {
			t.Errorf("agent: %v", err)
		}
	}
	rel := math.Abs(res.Objective-central.Objective) / central.Objective
	t.Logf("rounds %d, rejected %+v, F %.12g central %.12g %s", st.Rounds, st.Rejected, res.Objective, central.Objective, res.Status)
	if !res.Certified || res.Status != central.Status || rel > 1e-6 {
		t.Errorf("%s, F %.12g, central %.12g", res.Status, res.Objective, central.Objective)
	}
	return st
}

// A run on a NATS server that requires TLS with client certificates and
// authentication: clients without a credential, a client certificate,
// the CA or TLS are refused; the coordinator (user and password) and the
// agents (nkey) connect; an attacker with an account on the server but
// without the run's key injects a forged, a replayed and a foreign
// publication, a forged and a replayed command and forged replies; each
// is rejected and counted, and the run certifies at the central optimum.
func TestSecureNATSRun(t *testing.T) {
	dir := t.TempDir()
	f := natstest.WriteCerts(t, dir)
	seed := filepath.Join(dir, "agent.nk")
	pub := natstest.NkeyUser(t, seed)
	s := natstest.Start(t, f, natstest.Auth{Users: map[string]string{"coordinator": "coordinator secret", "eve": "eve's own"}, Nkeys: []string{pub}})
	url := s.ClientURL()
	coord := distributed.NATSSecurity{User: "coordinator", Password: "coordinator secret", CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey}
	agent := distributed.NATSSecurity{NkeySeed: seed, CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey}

	for name, sec := range map[string]distributed.NATSSecurity{
		"no credential":          {CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey},
		"wrong password":         {User: "coordinator", Password: "guess", CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey},
		"no client certificate":  {User: "coordinator", Password: "coordinator secret", CA: f.CA},
		"a stranger certificate": {User: "coordinator", Password: "coordinator secret", CA: f.CA, Cert: f.RogueCert, CertKey: f.RogueKey},
		"server not trusted":     {User: "coordinator", Password: "coordinator secret", TLS: true, Cert: f.ClientCert, CertKey: f.ClientKey},
		"wrong server name":      {User: "coordinator", Password: "coordinator secret", CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey, ServerName: "elsewhere"},
		"no TLS":                 {User: "coordinator", Password: "coordinator secret"},
	} {
		u := url
		if name == "no TLS" {
			u = strings.Replace(url, "tls://", "nats://", 1)
		}
		bus, err := natsbus.DialSecure(u, "intruder", &sec)
		if err == nil {
			bus.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		t.Logf("%s: %v", name, err)
	}

	g, central, p := distributed.Lattice(t, 300, 15, 5, 4)

	// The attacker: an account on the server, no key. It records the run.
	eveOpts, err := natsbus.SecurityOptions(&distributed.NATSSecurity{User: "eve", Password: "eve's own", CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	eve, err := nats.Connect(url, eveOpts...)
	if err != nil {
		t.Fatal(err)
	}
	defer eve.Close()
	var mu stdsync.Mutex
	var pose, cmd []byte
	forgeReplies := 0
	forger := distributed.NewSealer(t, distributed.OtherKey, "bcmsync")
	other := distributed.NewSealer(t, distributed.TestKey, "bcmsync") // a run elsewhere with the same key
	sub, err := eve.Subscribe("bcmsync.>", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case m.Subject == distributed.PoseSubject("bcmsync", 0):
			pose = m.Data
		case m.Subject == distributed.AgentSubject("bcmsync", 1) && m.Reply != "":
			cmd = m.Data
		case m.Subject == distributed.AgentSubject("bcmsync", 2) && m.Reply != "" && forgeReplies > 0:
			forgeReplies--
			_ = eve.Publish(m.Reply, forger.OKReply(m.Subject, 2))
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Unsubscribe()
	attacked := make(chan struct{})
	attack := func() {
		defer close(attacked)
		mu.Lock()
		forgeReplies = 3
		replay, replayCmd := pose, cmd
		mu.Unlock()
		if replay == nil || replayCmd == nil {
			t.Error("the attacker captured nothing")
			return
		}
		subject := distributed.PoseSubject("bcmsync", 0)
		forged := forger.Publication(subject, replay, 0, 1, 1<<62)
		foreign := other.Publication(subject, replay, 0, distributed.Random64(), 1<<62)
		for _, data := range [][]byte{replay, forged, foreign} {
			if err := eve.Publish(subject, data); err != nil {
				t.Error(err)
			}
		}
		cmdSubject := distributed.AgentSubject("bcmsync", 1)
		if err := eve.Publish(cmdSubject, replayCmd); err != nil {
			t.Error(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		rep, err := eve.RequestWithContext(ctx, cmdSubject, forger.Stop(cmdSubject, 1, 1<<62))
		if err != nil {
			t.Errorf("forged command: %v", err)
		} else if refused, err := distributed.IsErrorReply(rep.Data); err != nil || !refused {
			t.Errorf("forged command: refused %v, %v", refused, err)
		}
	}

	var once stdsync.Once
	opts := distributed.Options{Timeout: 20 * time.Second, Try: 2 * time.Second, Key: distributed.TestKey}
	opts.Sync.Progress = func(r bsync.Record) {
		if r.Iter == 5 {
			once.Do(func() { go attack() })
		}
	}
	st := natsRun(t, url, g, p, central, coord, func(int) distributed.NATSSecurity { return agent }, opts)
	<-attacked
	// A forged reply counts only when it beats the agent's own (the
	// coordinator's rejection of replies is tested on its own in
	// TestAuthHandshakeAndRejects).
	if !st.Authenticated || st.Rejected.Forged < 2 || st.Rejected.Replayed < 2 || st.Rejected.Foreign < 1 {
		t.Errorf("rejected %+v: want at least 2 forged (a publication, a command), 2 replayed, 1 foreign", st.Rejected)
	}
}

// The server configuration of docs/distributed.md ("A secured set-up on
// several machines"), with this test's certificates, nkeys and password in
// place of its placeholders, parses, and a secured run on it (TLS with
// client certificates, the coordinator by password, each agent by its own
// nkey with the permissions given there, every message authenticated)
// certifies at the central optimum; an agent may not publish as another.
func TestDocumentedServerConfig(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join("..", "..", "docs", "distributed.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, conf, ok := strings.Cut(string(doc), "```conf\n")
	conf, _, ok2 := strings.Cut(conf, "```")
	if !ok || !ok2 {
		t.Fatal("docs/distributed.md has no ```conf block")
	}
	dir := t.TempDir()
	f := natstest.WriteCerts(t, dir)
	seeds := []string{filepath.Join(dir, "agent-0.nk"), filepath.Join(dir, "agent-1.nk")}
	conf = strings.NewReplacer(
		"/etc/nats/server.pem", f.ServerCert, "/etc/nats/server-key.pem", f.ServerKey, "/etc/nats/ca.pem", f.CA,
		"COORDINATOR_PASSWORD_BCRYPT", "the coordinator's password",
		"AGENT_0_NKEY", natstest.NkeyUser(t, seeds[0]), "AGENT_1_NKEY", natstest.NkeyUser(t, seeds[1]),
	).Replace(conf)
	path := filepath.Join(dir, "bcmsync.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	sopts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("the documented configuration: %v", err)
	}
	sopts.Host, sopts.Port, sopts.NoLog, sopts.NoSigs = "127.0.0.1", server.RANDOM_PORT, true, true
	s := natstest.Run(t, sopts)

	// Agent 0 may not publish as agent 1 nor command it.
	tlsOnly := distributed.NATSSecurity{CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey}
	sec0 := tlsOnly
	sec0.NkeySeed = seeds[0]
	opts, err := natsbus.SecurityOptions(&sec0)
	if err != nil {
		t.Fatal(err)
	}
	violations := make(chan error, 2)
	nc, err := nats.Connect(s.ClientURL(), append(opts, nats.ErrorHandler(func(_ *nats.Conn, _ *nats.Subscription, err error) { violations <- err }))...)
	if err != nil {
		t.Fatal(err)
	}
	for _, subject := range []string{"bcmsync.pose.1", "bcmsync.agent.1"} {
		if err := nc.Publish(subject, []byte("x")); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-violations:
			if !strings.Contains(strings.ToLower(err.Error()), "permissions violation") {
				t.Errorf("%s: %v", subject, err)
			}
		case <-time.After(5 * time.Second):
			t.Errorf("agent 0 published on %s", subject)
		}
	}
	nc.Close()

	g, central, p := distributed.Lattice(t, 200, 10, 3, 2)
	coord := tlsOnly
	coord.User, coord.Password = "coordinator", "the coordinator's password"
	agent := func(k int) distributed.NATSSecurity {
		sec := tlsOnly
		sec.NkeySeed = seeds[k]
		return sec
	}
	if st := natsRun(t, s.ClientURL(), g, p, central, coord, agent, distributed.Options{Timeout: 10 * time.Second, Key: distributed.TestKey}); st.Rejected != (distributed.Rejections{}) {
		t.Errorf("%+v rejected", st.Rejected)
	}
}
