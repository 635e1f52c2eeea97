package distributed

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	stdsync "sync"
	"time"
)

// Message authentication (docs/distributed.md, "Security"). With a key
// (Options.Key, AgentOptions.Key), every message on the bus carries a
// trailer after its wire record:
//
//	version u8 | kind u8 | sender i32 | run u64 | seq u64 | life u64 | ref u64 |
//	(reply: rejected forged, replayed, foreign u64) |
//	(join: n u16 + (part i32, seq u64)*) | trailer length u32 | HMAC-SHA256
//
// little-endian. The MAC covers a domain label, the subject, the record and
// the trailer, so a message is bound to its run, its subject, its sender
// and its sequence number: a forged one (no key), one re-published on
// another subject, one under another sender's name, a replayed one and one
// of another run are each rejected, counted and logged, never passed on.
// The layer wraps the Bus, so the coordinator and the agents run unchanged
// on top of it.
//
// Freshness without clocks:
//   - The coordinator draws a random run id. An agent draws a random life
//     id each time it starts. A request must name the life of the agent it
//     is for; an agent answers a request naming another life (it has
//     restarted, or never met this coordinator) or another run with a
//     challenge carrying its life, and the coordinator sends the request
//     again as a join naming that life. So a captured request is of no use
//     to a later life of the agent, and a join can only come from a
//     coordinator that heard from this life; a run an agent has left in
//     this life is retired and its messages are refused.
//   - Every sender numbers its messages on each subject; a receiver keeps,
//     per sender and run, a window of the last authWindow numbers and
//     accepts each number once. Numbers start at the sender's clock in
//     nanoseconds, so a restarted agent's messages are above its previous
//     life's; the coordinator's join also tells an agent where every part's
//     publications stood (the floors: the agents report their numbers in
//     their replies), so a rejoining agent refuses its neighbours' earlier
//     messages and lifts its own numbering past its previous life's when
//     its clock went back.
//   - A reply names the request it answers (ref) and is checked against it.
const (
	authVersion = 1
	authFixed   = 2 + 4 + 4*8
	authWindow  = 64
	// authGap is how far a rejoining agent lifts its numbering above the
	// last number of its previous life that the coordinator saw: more than
	// that life can have published unseen.
	authGap = 1 << 32
	// authDomain separates these MACs from any other use of the key.
	authDomain = "bcmsync.auth/1\x00"
	// MinKeyBytes is the shortest key ReadKey accepts.
	MinKeyBytes = 32
)

// Trailer kinds.
const (
	authData      = 1 + iota // a publication, or a request inside the receiver's run
	authJoin                 // a request that brings its receiver into the sender's run
	authReply                // the reply to a request
	authChallenge            // an agent's answer to a request for another life or run
)

// Rejections counts messages that failed authentication, by cause. Each
// was logged and dropped, never applied.
type Rejections struct {
	// Forged: no valid MAC (made without the key, altered, or not a
	// bcmsync message), or valid but from a sender that may not send it.
	Forged int64
	// Replayed: a sequence number already received or below the window.
	Replayed int64
	// Foreign: of another run.
	Foreign int64
}

func (r Rejections) add(s Rejections) Rejections {
	return Rejections{r.Forged + s.Forged, r.Replayed + s.Replayed, r.Foreign + s.Foreign}
}

// Total is the number of messages rejected.
func (r Rejections) Total() int64 { return r.Forged + r.Replayed + r.Foreign }

// ReadKey reads a run's message key from path: the file's bytes, less
// surrounding white space (so a key written by a shell or an editor keeps
// working), at least MinKeyBytes of them. Make one with
// `openssl rand -base64 32 > FILE` (or `head -c 32 /dev/urandom | base64`).
func ReadKey(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	key := bytes.TrimSpace(data)
	if len(key) < MinKeyBytes {
		return nil, fmt.Errorf("%s: the key is %d bytes; want at least %d random ones (openssl rand -base64 32 > %s)", path, len(key), MinKeyBytes, path)
	}
	return key, nil
}

type trailer struct {
	kind   uint8
	sender int32
	run    uint64
	seq    uint64
	life   uint64 // requests: the receiver's life; replies, challenges: the sender's
	ref    uint64 // replies, challenges: the seq of the request answered
	counts Rejections
	floors []need
}

// window accepts each sequence number at or above low once, and refuses
// numbers more than authWindow below the highest seen.
type window struct {
	low, top uint64
	bits     uint64 // bit d: top-d seen
}

func newWindow(low uint64) *window { return &window{low: low, top: low} }

func (w *window) accept(s uint64) bool {
	if s < w.low {
		return false
	}
	if s > w.top {
		if d := s - w.top; d >= authWindow {
			w.bits = 0
		} else {
			w.bits <<= d
		}
		w.top = s
		w.bits |= 1
		return true
	}
	d := w.top - s
	if d >= authWindow || w.bits&(1<<d) != 0 {
		return false
	}
	w.bits |= 1 << d
	return true
}

// authBus authenticates everything sent and received through inner as one
// endpoint: the coordinator (self = coordinatorPart, the leader of its own
// run) or agent self.
type authBus struct {
	inner  Bus
	key    []byte
	prefix string
	self   int32
	log    *slog.Logger

	mu      stdsync.Mutex
	run     uint64 // the run this endpoint is in (0: none yet)
	life    uint64
	retired map[uint64]bool
	sent    map[string]uint64 // per subject, the last number sent
	seen    map[string]*window
	cmds    map[uint64]*window // an agent's requests received in this life, per run
	peers   map[string]*peer   // the coordinator's view of each agent subject
	floors  map[int32]uint64
	lives   map[int32]uint64 // the life each part's last reply came from
	counts  Rejections
	earlier Rejections // counts agents reported in lives since ended
	theirs  map[int32]Rejections
}

type peer struct {
	life   uint64
	joined bool
}

// secure wraps bus for endpoint self when key is set; the returned
// *authBus is nil (and its methods no-ops) without a key.
func secure(bus Bus, key []byte, prefix string, self int, log *slog.Logger) (Bus, *authBus) {
	if len(key) == 0 {
		return bus, nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	b := &authBus{inner: bus, key: append([]byte(nil), key...), prefix: prefix, self: int32(self), log: log,
		life: random64(), retired: map[uint64]bool{}, sent: map[string]uint64{}, seen: map[string]*window{},
		cmds: map[uint64]*window{}, peers: map[string]*peer{}, floors: map[int32]uint64{},
		lives: map[int32]uint64{}, theirs: map[int32]Rejections{}}
	if self == coordinatorPart {
		b.run = random64()
	}
	return b, b
}

func random64() uint64 {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on supported systems
	}
	return binary.LittleEndian.Uint64(b[:]) | 1
}

// report copies the rejections into st (a no-op without a key).
func (b *authBus) report(st *Stats) {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	st.Authenticated = true
	st.Rejected = b.counts.add(b.earlier)
	for _, r := range b.theirs {
		st.Rejected = st.Rejected.add(r)
	}
}

// owner parses PREFIX.pose.k and PREFIX.agent.k.
func (b *authBus) owner(subject string) (int32, bool) {
	rest, ok := strings.CutPrefix(subject, b.prefix+".")
	if !ok {
		return 0, false
	}
	kind, num, ok := strings.Cut(rest, ".")
	if !ok || (kind != "pose" && kind != "agent") {
		return 0, false
	}
	k, err := strconv.ParseInt(num, 10, 32)
	if err != nil || k < 0 {
		return 0, false
	}
	return int32(k), true
}

// next numbers a message on subject (mu held). Numbering starts at the
// clock so that a restarted sender continues above its previous life.
func (b *authBus) next(subject string) uint64 {
	s := b.sent[subject]
	if s == 0 {
		s = uint64(time.Now().UnixNano())
	}
	s++
	b.sent[subject] = s
	return s
}

// reject counts and logs a message that is dropped (mu held).
func (b *authBus) reject(cause *int64, why, subject string, args ...any) {
	*cause++
	b.log.Warn("message rejected: "+why, append([]any{"part", b.self, "subject", subject}, args...)...)
}

func (b *authBus) seal(subject string, payload []byte, t *trailer) []byte {
	le := binary.LittleEndian
	out := make([]byte, 0, len(payload)+authFixed+24+2+12*len(t.floors)+4+sha256.Size)
	out = append(out, payload...)
	out = append(out, authVersion, t.kind)
	out = le.AppendUint32(out, uint32(t.sender))
	for _, v := range [4]uint64{t.run, t.seq, t.life, t.ref} {
		out = le.AppendUint64(out, v)
	}
	switch t.kind {
	case authReply:
		for _, v := range [3]int64{t.counts.Forged, t.counts.Replayed, t.counts.Foreign} {
			out = le.AppendUint64(out, uint64(v))
		}
	case authJoin:
		out = le.AppendUint16(out, uint16(len(t.floors)))
		for _, f := range t.floors {
			out = le.AppendUint32(out, uint32(int32(f.Part)))
			out = le.AppendUint64(out, f.Seq)
		}
	}
	out = le.AppendUint32(out, uint32(len(out)-len(payload)))
	return append(out, b.mac(subject, out)...)
}

func (b *authBus) mac(subject string, body []byte) []byte {
	h := hmac.New(sha256.New, b.key)
	h.Write([]byte(authDomain))
	var n [2]byte
	binary.LittleEndian.PutUint16(n[:], uint16(len(subject)))
	h.Write(n[:])
	h.Write([]byte(subject))
	h.Write(body)
	return h.Sum(nil)
}

var errNoTrailer = errors.New("no authentication trailer (was it sent without a key?)")

// open checks data's MAC for subject and splits it into its trailer and
// the record before it.
func (b *authBus) open(subject string, data []byte) (*trailer, []byte, error) {
	le := binary.LittleEndian
	if len(data) < authFixed+4+sha256.Size {
		return nil, nil, errNoTrailer
	}
	body, sum := data[:len(data)-sha256.Size], data[len(data)-sha256.Size:]
	tlen := int(le.Uint32(body[len(body)-4:]))
	if tlen < authFixed || tlen > len(body)-4 {
		return nil, nil, errNoTrailer
	}
	if !hmac.Equal(sum, b.mac(subject, body)) {
		return nil, nil, errors.New("MAC mismatch (made with another key, altered, or sent on another subject)")
	}
	end := len(body) - 4
	payload, p := body[:end-tlen], body[end-tlen:end]
	if p[0] != authVersion {
		return nil, nil, fmt.Errorf("authentication version %d, want %d", p[0], authVersion)
	}
	t := &trailer{kind: p[1], sender: int32(le.Uint32(p[2:])), run: le.Uint64(p[6:]), seq: le.Uint64(p[14:]),
		life: le.Uint64(p[22:]), ref: le.Uint64(p[30:])}
	p = p[authFixed:]
	switch t.kind {
	case authReply:
		if len(p) != 24 {
			return nil, nil, errors.New("bad reply trailer")
		}
		t.counts = Rejections{int64(le.Uint64(p)), int64(le.Uint64(p[8:])), int64(le.Uint64(p[16:]))}
		p = p[24:]
	case authJoin:
		if len(p) < 2 || len(p) != 2+12*int(le.Uint16(p)) {
			return nil, nil, errors.New("bad join trailer")
		}
		t.floors = make([]need, le.Uint16(p))
		p = p[2:]
		for k := range t.floors {
			t.floors[k] = need{Part: int(int32(le.Uint32(p))), Seq: le.Uint64(p[4:])}
			p = p[12:]
		}
	case authData, authChallenge:
	default:
		return nil, nil, fmt.Errorf("unknown authentication kind %d", t.kind)
	}
	if len(p) != 0 {
		return nil, nil, errors.New("bad trailer length")
	}
	return t, payload, nil
}

// Publish implements Bus.
func (b *authBus) Publish(subject string, data []byte) error {
	b.mu.Lock()
	t := &trailer{kind: authData, sender: b.self, run: b.run, seq: b.next(subject)}
	b.mu.Unlock()
	return b.inner.Publish(subject, b.seal(subject, data, t))
}

// Subscribe implements Bus: h sees only the messages of this endpoint's
// run, sent by the subject's owner, each once.
func (b *authBus) Subscribe(subject string, h func([]byte)) (func(), error) {
	owner, ok := b.owner(subject)
	if !ok {
		return nil, fmt.Errorf("authenticated bus: no sender owns subject %s", subject)
	}
	return b.inner.Subscribe(subject, func(data []byte) {
		t, payload, err := b.open(subject, data)
		b.mu.Lock()
		switch {
		case err != nil:
			b.reject(&b.counts.Forged, "authentication failed", subject, "err", err)
		case t.kind != authData || t.sender != owner:
			b.reject(&b.counts.Forged, "not a publication of the subject's owner", subject, "kind", t.kind, "sender", t.sender)
		case b.run == 0:
			// Not in a run yet (starting or restarted): nothing to apply
			// it to, and no way to tell old from new.
			b.log.Debug("message before joining a run dropped", "part", b.self, "subject", subject)
		case t.run != b.run:
			b.reject(&b.counts.Foreign, "of another run", subject, "sender", t.sender, "run", t.run)
		case !windowOf(b.seen, subject).accept(t.seq):
			b.reject(&b.counts.Replayed, "replayed", subject, "sender", t.sender, "seq", t.seq)
		default:
			b.mu.Unlock()
			h(payload)
			return
		}
		b.mu.Unlock()
	})
}

// windowOf returns m's window for k, a new one if it has none (mu held).
func windowOf[K comparable](m map[K]*window, k K) *window {
	w := m[k]
	if w == nil {
		w = newWindow(1)
		m[k] = w
	}
	return w
}

// Serve implements Bus: h sees each request for this life and run once;
// a request for another life or run gets a challenge, a join for a new
// run brings this endpoint into it.
func (b *authBus) Serve(subject string, h func([]byte) []byte) (func(), error) {
	if _, ok := b.owner(subject); !ok {
		return nil, fmt.Errorf("authenticated bus: no part owns subject %s", subject)
	}
	return b.inner.Serve(subject, func(req []byte) []byte {
		t, payload, err := b.open(subject, req)
		b.mu.Lock()
		if err != nil {
			b.reject(&b.counts.Forged, "authentication failed", subject, "err", err)
			b.mu.Unlock()
			return b.refusal(req)
		}
		var reply *trailer
		switch {
		case (t.kind != authData && t.kind != authJoin) || t.sender != coordinatorPart:
			b.reject(&b.counts.Forged, "not a request of the coordinator", subject, "kind", t.kind, "sender", t.sender)
		case t.life != b.life:
			// Meant for another life of this part, or the first contact.
			reply = &trailer{kind: authChallenge}
		case b.retired[t.run] || (b.self == coordinatorPart && t.run != b.run):
			b.reject(&b.counts.Foreign, "of a run left", subject, "run", t.run)
		case !windowOf(b.cmds, t.run).accept(t.seq):
			// Only requests naming this life get a window: they come from
			// coordinators this life has challenged, so there are few runs.
			b.reject(&b.counts.Replayed, "replayed", subject, "seq", t.seq)
		case t.run != b.run && t.kind != authJoin:
			reply = &trailer{kind: authChallenge}
		default:
			if t.run != b.run {
				b.join(t)
			}
			reply = &trailer{kind: authReply}
		}
		if reply == nil {
			b.mu.Unlock()
			return nil
		}
		reply.sender, reply.run, reply.life, reply.ref = b.self, t.run, b.life, t.seq
		b.mu.Unlock()
		if reply.kind == authChallenge {
			b.log.Debug("challenging a request for another life or run", "part", b.self, "run", t.run)
			return b.seal(subject, nil, reply)
		}
		out := h(payload)
		if out == nil {
			return nil
		}
		b.mu.Lock()
		reply.seq, reply.counts = b.sent[poseSubject(b.prefix, int(b.self))], b.counts
		b.mu.Unlock()
		return b.seal(subject, out, reply)
	})
}

// join enters t's run (mu held): the run left is retired, the windows
// start at the join's floors, and the own numbering is lifted past the
// floor the coordinator saw from this part (a previous life's).
func (b *authBus) join(t *trailer) {
	if b.run != 0 {
		b.retired[b.run] = true
		delete(b.cmds, b.run)
	}
	b.run = t.run
	b.seen = map[string]*window{}
	for _, f := range t.floors {
		s := poseSubject(b.prefix, f.Part)
		if int32(f.Part) == b.self {
			if b.sent[s] <= f.Seq {
				b.sent[s] = f.Seq + authGap
			}
			continue
		}
		b.seen[s] = newWindow(f.Seq)
	}
	b.log.Info("joined run", "part", b.self, "run", t.run)
}

// refusal answers a request that failed authentication with a plain
// error reply, so that a coordinator without the key learns why.
func (b *authBus) refusal(req []byte) []byte {
	rep := &message{Kind: kindReply, Part: int(b.self), Status: statusError,
		Text: fmt.Sprintf("agent %d refused a command that failed authentication: the coordinator and the agents must share one key", b.self)}
	if m, err := decode(req); err == nil {
		rep.Op, rep.Round, rep.Run = m.Op, m.Round, m.Run
	}
	return encode(nil, rep)
}

// maxChallenges bounds how often one Request answers a challenge: once
// normally, again if the agent restarted in between.
const maxChallenges = 3

// Request implements Bus: the request names the receiver's life as last
// heard, a challenge is answered by a join, and only a reply from the
// subject's owner to this very request is returned.
func (b *authBus) Request(ctx context.Context, subject string, data []byte) ([]byte, error) {
	owner, ok := b.owner(subject)
	if !ok {
		return nil, fmt.Errorf("authenticated bus: no part owns subject %s", subject)
	}
	for range maxChallenges {
		b.mu.Lock()
		p := b.peers[subject]
		if p == nil {
			p = &peer{}
			b.peers[subject] = p
		}
		t := &trailer{kind: authData, sender: b.self, run: b.run, seq: b.next(subject), life: p.life}
		if p.life != 0 && !p.joined {
			t.kind = authJoin
			for part, s := range b.floors {
				t.floors = append(t.floors, need{Part: int(part), Seq: s})
			}
		}
		b.mu.Unlock()

		out, err := b.inner.Request(ctx, subject, b.seal(subject, data, t))
		if err != nil {
			return nil, err
		}
		rt, payload, err := b.open(subject, out)
		b.mu.Lock()
		switch {
		case err != nil:
			b.reject(&b.counts.Forged, "reply failed authentication", subject, "err", err)
			err = fmt.Errorf("%s: reply failed authentication (an agent with another key, or none?): %w%s", subject, err, refusalText(out))
		case (rt.kind != authReply && rt.kind != authChallenge) || rt.sender != owner:
			b.reject(&b.counts.Forged, "not a reply of the subject's owner", subject, "kind", rt.kind, "sender", rt.sender)
			err = fmt.Errorf("%s: reply from sender %d of kind %d", subject, rt.sender, rt.kind)
		case rt.ref != t.seq:
			b.reject(&b.counts.Replayed, "reply to another request", subject, "ref", rt.ref, "seq", t.seq)
			err = fmt.Errorf("%s: reply to another request", subject)
		case rt.run != b.run:
			b.reject(&b.counts.Foreign, "reply of another run", subject, "run", rt.run)
			err = fmt.Errorf("%s: reply of another run", subject)
		case rt.kind == authChallenge:
			p.life, p.joined = rt.life, false
			b.mu.Unlock()
			continue
		default:
			if t.kind == authJoin && p.life == t.life {
				p.joined = true
			}
			b.floors[owner] = max(b.floors[owner], rt.seq)
			if b.lives[owner] != rt.life {
				b.earlier = b.earlier.add(b.theirs[owner])
				b.lives[owner] = rt.life
			}
			b.theirs[owner] = rt.counts
			b.mu.Unlock()
			return payload, nil
		}
		b.mu.Unlock()
		// The sender resends at once: pause so that a misconfigured agent
		// (another key) is not asked in a tight loop.
		select {
		case <-time.After(100 * time.Millisecond):
		case <-ctx.Done():
		}
		return nil, err
	}
	return nil, fmt.Errorf("%s: challenged %d times in a row (the agent restarting over and over?)", subject, maxChallenges)
}

// refusalText quotes an agent's plain refusal, if out is one.
func refusalText(out []byte) string {
	if m, err := decode(out); err == nil && m.Text != "" {
		return "; the agent says: " + m.Text
	}
	return ""
}
