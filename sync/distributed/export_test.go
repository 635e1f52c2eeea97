package distributed

import "testing"

// Hooks for natsauth_test.go, which runs the protocol over package
// natsbus: natsbus imports this package, so only a test of package
// distributed_test can use both, and it reaches the test helpers and the
// authentication layer's internals through these.
var (
	Lattice      = lattice
	TestKey      = testKey
	OtherKey     = otherKey
	TestLogger   = testLogger
	PoseSubject  = poseSubject
	AgentSubject = agentSubject
	Random64     = random64
)

// Sealer seals messages as a holder of its key does: with another key
// they are forged; with the run's key but another run, foreign.
type Sealer struct{ b *authBus }

// NewSealer makes a Sealer for subjects under prefix.
func NewSealer(t *testing.T, key []byte, prefix string) Sealer {
	_, b := secure(nil, key, prefix, 0, testLogger(t))
	return Sealer{b}
}

// Publication seals payload as part sender's publication on subject, in
// run with sequence number seq.
func (s Sealer) Publication(subject string, payload []byte, sender int, run, seq uint64) []byte {
	return s.b.seal(subject, payload, &trailer{kind: authData, sender: int32(sender), run: run, seq: seq})
}

// Stop seals the coordinator's command to stop, on subject, in run with
// sequence number seq.
func (s Sealer) Stop(subject string, run, seq uint64) []byte {
	return s.b.seal(subject, encode(nil, &message{Kind: kindCmd, Op: opStop}), &trailer{kind: authData, sender: coordinatorPart, run: run, seq: seq})
}

// OKReply seals agent part's reply "ok" to a request on subject.
func (s Sealer) OKReply(subject string, part int) []byte {
	return s.b.seal(subject, encode(nil, &message{Kind: kindReply, Part: part, Status: statusOK}), &trailer{kind: authReply, sender: int32(part)})
}

// IsErrorReply reports whether data is a reply that refuses its request.
func IsErrorReply(data []byte) (bool, error) {
	m, err := decode(data)
	if err != nil {
		return false, err
	}
	return m.Status == statusError, nil
}
