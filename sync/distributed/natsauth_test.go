package distributed

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	stdsync "sync"
	"testing"
	"time"

	"github.com/bcmsync/bcmsync/datasets"
	"github.com/bcmsync/bcmsync/internal/natstest"
	"github.com/bcmsync/bcmsync/posegraph"
	bsync "github.com/bcmsync/bcmsync/sync"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// lattice is a Manhattan graph of n poses, its central solution and a BFS
// partition into k parts.
func lattice(t *testing.T, n, side int, seed uint64, k int) (*posegraph.Graph, *bsync.Result, *Partition) {
	t.Helper()
	g, _, err := datasets.Manhattan(n, side, datasets.Config{Kappa: 100, Tau: 10, LoopProb: 0.3, Seed: seed})
	if err != nil {
		t.Fatal(err)
	}
	central, err := bsync.Solve(context.Background(), g, bsync.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := BFS(g, k)
	if err != nil {
		t.Fatal(err)
	}
	return g, central, p
}

// natsRun solves g over the NATS server at url with the coordinator and
// each agent on its own connection, signed in with coord and agent(k), and
// checks the result against central.
func natsRun(t *testing.T, url string, g *posegraph.Graph, p *Partition, central *bsync.Result, coord NATSSecurity, agent func(k int) NATSSecurity, opts Options) *Stats {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errs := make(chan error, p.K)
	for k := 0; k < p.K; k++ {
		bus, err := dial(url, "agent", agent(k))
		if err != nil {
			t.Fatal(err)
		}
		go func() {
			defer bus.Close()
			errs <- RunAgent(ctx, bus, g, p, k, AgentOptions{Key: opts.Key, Logger: testLogger(t)})
		}()
	}
	bus, err := dial(url, "coordinator", coord)
	if err != nil {
		t.Fatal(err)
	}
	res, st, err := Solve(ctx, bus, g, p, opts)
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

// dial connects with sec's options.
func dial(url, name string, sec NATSSecurity) (*NATSBus, error) {
	opts, err := sec.Options()
	if err != nil {
		return nil, err
	}
	return DialNATS(url, name, opts...)
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
	coord := NATSSecurity{User: "coordinator", Password: "coordinator secret", CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey}
	agent := NATSSecurity{NkeySeed: seed, CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey}

	for name, sec := range map[string]NATSSecurity{
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
		bus, err := dial(u, "intruder", sec)
		if err == nil {
			bus.Close()
			t.Errorf("%s: connected", name)
			continue
		}
		t.Logf("%s: %v", name, err)
	}

	g, central, p := lattice(t, 300, 15, 5, 4)

	// The attacker: an account on the server, no key. It records the run.
	eve, err := dial(url, "eve", NATSSecurity{User: "eve", Password: "eve's own", CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey})
	if err != nil {
		t.Fatal(err)
	}
	defer eve.Close()
	var mu stdsync.Mutex
	var pose, cmd []byte
	forgeReplies := 0
	_, forger := secure(nil, otherKey, "bcmsync", 0, testLogger(t))
	_, other := secure(nil, testKey, "bcmsync", 0, testLogger(t)) // a run elsewhere with the same key
	sub, err := eve.nc.Subscribe("bcmsync.>", func(m *nats.Msg) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case m.Subject == poseSubject("bcmsync", 0):
			pose = m.Data
		case m.Subject == agentSubject("bcmsync", 1) && m.Reply != "":
			cmd = m.Data
		case m.Subject == agentSubject("bcmsync", 2) && m.Reply != "" && forgeReplies > 0:
			forgeReplies--
			_ = eve.nc.Publish(m.Reply, forger.seal(m.Subject, encode(nil, &message{Kind: kindReply, Part: 2, Status: statusOK}), &trailer{kind: authReply, sender: 2}))
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
		subject := poseSubject("bcmsync", 0)
		forged := forger.seal(subject, replay, &trailer{kind: authData, sender: 0, run: 1, seq: 1 << 62})
		foreign := other.seal(subject, replay, &trailer{kind: authData, sender: 0, run: random64(), seq: 1 << 62})
		for _, data := range [][]byte{replay, forged, foreign} {
			if err := eve.Publish(subject, data); err != nil {
				t.Error(err)
			}
		}
		cmdSubject := agentSubject("bcmsync", 1)
		if err := eve.Publish(cmdSubject, replayCmd); err != nil {
			t.Error(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		forgedCmd := forger.seal(cmdSubject, encode(nil, &message{Kind: kindCmd, Op: opStop}), &trailer{kind: authData, sender: coordinatorPart, run: 1, seq: 1 << 62})
		rep, err := eve.Request(ctx, cmdSubject, forgedCmd)
		if m, derr := decode(rep); err != nil || derr != nil || m.Status != statusError {
			t.Errorf("forged command: %v %v", err, derr)
		}
	}

	var once stdsync.Once
	opts := Options{Timeout: 20 * time.Second, Try: 2 * time.Second, Key: testKey}
	opts.Sync.Progress = func(r bsync.Record) {
		if r.Iter == 5 {
			once.Do(func() { go attack() })
		}
	}
	st := natsRun(t, url, g, p, central, coord, func(int) NATSSecurity { return agent }, opts)
	<-attacked
	// A forged reply counts only when it beats the agent's own (the
	// coordinator's rejection of replies is tested on its own in
	// TestAuthHandshakeAndRejects).
	if !st.Authenticated || st.Rejected.Forged < 2 || st.Rejected.Replayed < 2 || st.Rejected.Foreign < 1 {
		t.Errorf("rejected %+v: want at least 2 forged (a publication, a command), 2 replayed, 1 foreign", st.Rejected)
	}
}

// The other ways in: a credentials file (operator mode) and a token; and
// the refusals without them.
func TestSecureNATSCredsAndToken(t *testing.T) {
	dir := t.TempDir()
	f := natstest.WriteCerts(t, dir)
	creds := filepath.Join(dir, "agent.creds")
	s := natstest.StartOperator(t, f, creds)
	tlsOnly := NATSSecurity{CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey}
	withCreds := tlsOnly
	withCreds.Creds = creds
	bus, err := dial(s.ClientURL(), "agent", withCreds)
	if err != nil {
		t.Fatalf("with the credentials file: %v", err)
	}
	bus.Close()
	if bus, err := dial(s.ClientURL(), "intruder", tlsOnly); err == nil {
		bus.Close()
		t.Error("operator mode: connected without credentials")
	}

	ts := natstest.Start(t, f, natstest.Auth{Token: "the token"})
	withToken := tlsOnly
	withToken.Token = "the token"
	bus, err = dial(ts.ClientURL(), "agent", withToken)
	if err != nil {
		t.Fatalf("with the token: %v", err)
	}
	bus.Close()
	withToken.Token = "a guess"
	if bus, err := dial(ts.ClientURL(), "intruder", withToken); err == nil {
		bus.Close()
		t.Error("connected with a wrong token")
	}
}

// NATSSecurity.Options refuses missing and ill-formed files with a
// FileError naming the field and the file, and inconsistent settings.
func TestNATSSecurityErrors(t *testing.T) {
	dir := t.TempDir()
	f := natstest.WriteCerts(t, dir)
	seed := filepath.Join(dir, "agent.nk")
	natstest.NkeyUser(t, seed)
	junk := filepath.Join(dir, "junk.txt")
	if err := os.WriteFile(junk, []byte("not a credential\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing")
	for _, c := range []struct {
		sec         NATSSecurity
		field, file string
	}{
		{NATSSecurity{Creds: missing}, "Creds", missing},
		{NATSSecurity{Creds: junk}, "Creds", junk},
		{NATSSecurity{Creds: seed}, "Creds", seed},
		{NATSSecurity{NkeySeed: missing}, "NkeySeed", missing},
		{NATSSecurity{NkeySeed: junk}, "NkeySeed", junk},
		{NATSSecurity{CA: missing}, "CA", missing},
		{NATSSecurity{CA: junk}, "CA", junk},
		{NATSSecurity{Cert: missing, CertKey: f.ClientKey}, "Cert", missing},
		{NATSSecurity{Cert: f.ClientCert, CertKey: missing}, "CertKey", missing},
		{NATSSecurity{Cert: junk, CertKey: f.ClientKey}, "Cert", junk},
		{NATSSecurity{Cert: f.ClientCert, CertKey: f.ServerKey}, "Cert", f.ClientCert},
	} {
		_, err := c.sec.Options()
		var fe *FileError
		if !errors.As(err, &fe) || fe.Field != c.field || fe.File != c.file || !strings.Contains(err.Error(), c.file) {
			t.Errorf("%+v: %v; want a FileError for %s %s", c.sec, err, c.field, c.file)
			continue
		}
		t.Log(err)
	}
	for _, sec := range []NATSSecurity{
		{NkeySeed: seed, Token: "t"},
		{User: "u"},
		{Password: "p"},
		{Cert: f.ClientCert},
	} {
		if _, err := sec.Options(); err == nil {
			t.Errorf("%+v accepted", sec)
		}
	}
	if opts, err := (&NATSSecurity{}).Options(); err != nil || len(opts) != 0 {
		t.Errorf("no security: %d options, %v", len(opts), err)
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
	tlsOnly := NATSSecurity{CA: f.CA, Cert: f.ClientCert, CertKey: f.ClientKey}
	sec0 := tlsOnly
	sec0.NkeySeed = seeds[0]
	opts, err := sec0.Options()
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

	g, central, p := lattice(t, 200, 10, 3, 2)
	coord := tlsOnly
	coord.User, coord.Password = "coordinator", "the coordinator's password"
	agent := func(k int) NATSSecurity {
		sec := tlsOnly
		sec.NkeySeed = seeds[k]
		return sec
	}
	if st := natsRun(t, s.ClientURL(), g, p, central, coord, agent, Options{Timeout: 10 * time.Second, Key: testKey}); st.Rejected != (Rejections{}) {
		t.Errorf("%+v rejected", st.Rejected)
	}
}
