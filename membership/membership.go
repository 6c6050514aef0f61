// Package membership is skiff's gossip layer: every server and agent is a
// member of one hashicorp/memberlist cluster (SWIM: periodic probes,
// indirect probes through other members, suspicion, then dead).
//
// What it gives the rest of skiff:
//   - joining through any member: an agent needs one address, not the API
//     server's, because every member gossips everyone's metadata, including
//     the API server address the servers advertise (Meta.APIServer);
//   - failure detection: the control plane reads member state (alive,
//     suspect, dead, left) to mark Nodes NotReady quickly, before their
//     heartbeats run out;
//   - a shared secret: gossip is encrypted (AES-GCM) with a key derived from
//     the cluster token, so a member with the wrong token cannot join, and
//     both sides say so.
//
// Members are level-triggered: Changed() signals "something changed" and
// callers read Members(), as a control loop would; no change is ever lost by
// a slow reader. Changed() is meant for one reader per Membership (the
// control plane's node lifecycle controller): two readers would share its
// signals.
package membership

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"
)

// Roles a member can have.
const (
	RoleServer = "server"
	RoleAgent  = "agent"
)

// DefaultPort is the gossip port (memberlist's own default).
const DefaultPort = 7946

// ErrWrongToken is returned by Start when the members it tried to join
// could not read our messages: they use a different cluster token.
var ErrWrongToken = errors.New("gossip messages could not be decrypted: the cluster token is wrong")

// ErrNameTaken is what a *NameTakenError matches with errors.Is.
var ErrNameTaken = errors.New("member name already taken")

// NameTakenError is returned by Start when the cluster it joined already has
// a live member of the same name at another address: memberlist keeps the
// first one and ignores us, so we would be a member nobody sees.
type NameTakenError struct {
	// Name is the name asked for; Addr is the host:port of the member
	// that holds it.
	Name, Addr string
}

func (e *NameTakenError) Error() string {
	return fmt.Sprintf("member name %q is already taken in the cluster by %s", e.Name, e.Addr)
}

// Is makes errors.Is(err, ErrNameTaken) true.
func (e *NameTakenError) Is(target error) bool { return target == ErrNameTaken }

// Meta is what each member tells the others about itself. It travels in
// memberlist's node metadata (at most 512 bytes).
type Meta struct {
	// Role: server or agent.
	Role string `json:"r"`
	// APIServer is the API server URL a server advertises.
	APIServer string `json:"a,omitempty"`
	// Node is the Node object name of an agent.
	Node string `json:"n,omitempty"`
	// Leaving is set just before a graceful leave, so that others can tell
	// "left" from "failed" (memberlist reports both through NotifyLeave).
	Leaving bool `json:"l,omitempty"`
}

// State of a member as gossip sees it.
type State string

// Member states.
const (
	Alive   State = "alive"
	Suspect State = "suspect"
	Dead    State = "dead"
	Left    State = "left"
)

// Member is one member of the cluster.
type Member struct {
	Name  string
	Addr  string // host:port of its gossip endpoint
	Meta  Meta
	State State
	// Since is when the member entered State, as seen by this member.
	Since time.Time
}

// Config of a member. Start with DefaultConfig.
type Config struct {
	// Name must be unique in the cluster (the node name for agents).
	Name string
	// BindAddr and BindPort to listen on; port 0 picks a free port (tests).
	BindAddr string
	BindPort int
	// AdvertiseAddr is the address others reach us at ("" = detected).
	AdvertiseAddr string
	// Token is the cluster token; the gossip key is derived from it.
	Token string
	// Meta is advertised to every member.
	Meta Meta
	// Join lists members to join ("host" or "host:port"); empty starts a new cluster.
	Join []string
	// Log receives memberlist's messages (at debug) and our own.
	Log *slog.Logger
	// Fast shortens probe and gossip intervals, for tests on loopback and
	// for a one-machine cluster; the default is memberlist's LAN profile.
	Fast bool
}

// DefaultConfig uses memberlist's LAN defaults (1 s probes, failure seen in
// a few seconds on a LAN) on port 7946.
func DefaultConfig(name, token string) Config {
	return Config{Name: name, BindAddr: "0.0.0.0", BindPort: DefaultPort, Token: token}
}

// Validate reports every problem of the config at once.
func (c Config) Validate() error {
	var errs []error
	if c.Name == "" {
		errs = append(errs, errors.New("name is required"))
	}
	if c.Token == "" {
		errs = append(errs, errors.New("token is required (it keys the gossip encryption)"))
	}
	if c.BindPort < 0 || c.BindPort > 65535 {
		errs = append(errs, fmt.Errorf("bind port %d out of range", c.BindPort))
	}
	if c.Meta.Role != RoleServer && c.Meta.Role != RoleAgent {
		errs = append(errs, fmt.Errorf("role %q: must be %q or %q", c.Meta.Role, RoleServer, RoleAgent))
	}
	return errors.Join(errs...)
}

// GossipKey derives the 32-byte AES key from the cluster token.
func GossipKey(token string) []byte {
	sum := sha256.Sum256([]byte("skiff-gossip-v1:" + token))
	return sum[:]
}

// Membership is a running member. Stop it with Stop.
type Membership struct {
	ml  *memberlist.Memberlist
	log *slog.Logger
	d   *delegate

	stopOnce sync.Once
}

// Start creates the local member and joins cfg.Join (if any). A join whose
// every target rejects our encryption key fails with ErrWrongToken.
func Start(cfg Config) (*Membership, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gossip config: %w", err)
	}
	lg := cfg.Log
	if lg == nil {
		lg = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	lg = lg.With("component", "gossip")
	meta, err := json.Marshal(cfg.Meta)
	if err != nil {
		return nil, fmt.Errorf("encode gossip metadata: %w", err)
	}
	d := &delegate{name: cfg.Name, log: lg, meta: meta, members: map[string]*Member{}, changed: make(chan struct{}, 1)}

	mc := memberlist.DefaultLANConfig()
	if cfg.Fast {
		mc = memberlist.DefaultLocalConfig()
		mc.ProbeInterval = 200 * time.Millisecond
		mc.ProbeTimeout = 100 * time.Millisecond
		mc.GossipInterval = 50 * time.Millisecond
		mc.SuspicionMult = 2
		mc.PushPullInterval = 5 * time.Second
	}
	mc.Name = cfg.Name
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = cfg.BindPort
	mc.AdvertisePort = cfg.BindPort
	if cfg.AdvertiseAddr != "" {
		mc.AdvertiseAddr = cfg.AdvertiseAddr
	}
	mc.SecretKey = GossipKey(cfg.Token)
	mc.Delegate = d
	mc.Events = d
	mc.Conflict = d
	mc.LogOutput = &logWriter{log: lg, d: d}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("start gossip on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	m := &Membership{ml: ml, log: lg, d: d}
	if len(cfg.Join) > 0 {
		targets := make([]string, len(cfg.Join))
		for i, j := range cfg.Join {
			targets[i] = withDefaultPort(j)
		}
		n, err := ml.Join(targets)
		if n == 0 {
			_ = ml.Shutdown()
			if err != nil && isKeyError(err.Error()) {
				return nil, fmt.Errorf("join %s: %w", strings.Join(targets, ", "), ErrWrongToken)
			}
			if err == nil {
				err = errors.New("no member answered")
			}
			return nil, fmt.Errorf("join %s: %w", strings.Join(targets, ", "), err)
		}
		// The join's push-pull merged the remote state before Join
		// returned: a member holding our name showed up as a conflict.
		if addr, taken := d.takenBy(); taken {
			_ = ml.Shutdown()
			return nil, fmt.Errorf("join %s: %w", strings.Join(targets, ", "), &NameTakenError{Name: cfg.Name, Addr: addr})
		}
		lg.Info("joined cluster", "via", strings.Join(targets, ","), "members", ml.NumMembers())
	}
	return m, nil
}

// LocalAddr is the host:port this member gossips on.
func (m *Membership) LocalAddr() string {
	n := m.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Members returns every member seen, sorted by name, including those dead
// or left (with their state).
func (m *Membership) Members() []Member {
	// memberlist keeps suspicion internally; read it first, without our
	// lock: memberlist calls our delegate (which takes d.mu) while holding
	// its own node lock, so taking them in the other order would deadlock.
	states := map[string]memberlist.NodeStateType{}
	for _, n := range m.ml.Members() {
		states[n.Name] = n.State
	}
	m.d.mu.Lock()
	out := make([]Member, 0, len(m.d.members))
	for _, mem := range m.d.members {
		out = append(out, *mem)
	}
	m.d.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	for i := range out {
		if st, ok := states[out[i].Name]; ok && st == memberlist.StateSuspect && out[i].State == Alive {
			out[i].State = Suspect
		}
	}
	return out
}

// APIServer returns the API server URL advertised by an alive server member.
func (m *Membership) APIServer() (string, bool) {
	for _, mem := range m.Members() {
		if mem.State == Alive && mem.Meta.Role == RoleServer && mem.Meta.APIServer != "" {
			return mem.Meta.APIServer, true
		}
	}
	return "", false
}

// APIServers returns the API server URLs advertised by every alive server
// member, sorted by member name and without repeats: with several servers
// (embedded etcd) each advertises its own, and an agent's client fails
// over among them.
func (m *Membership) APIServers() []string {
	var out []string
	for _, mem := range m.Members() {
		if mem.State == Alive && mem.Meta.Role == RoleServer && mem.Meta.APIServer != "" && !slices.Contains(out, mem.Meta.APIServer) {
			out = append(out, mem.Meta.APIServer)
		}
	}
	return out
}

// Changed is signalled (coalesced) whenever a member joins, leaves, fails or
// changes metadata; read Members() after it fires.
func (m *Membership) Changed() <-chan struct{} { return m.d.changed }

// RejectedJoins counts gossip messages that could not be decrypted: a
// member with a wrong token trying to talk to us.
func (m *Membership) RejectedJoins() int64 {
	m.d.mu.Lock()
	defer m.d.mu.Unlock()
	return m.d.rejected
}

// Stop leaves the cluster (telling others, so they see Left rather than
// Dead) and shuts the member down. Safe to call twice.
func (m *Membership) Stop() {
	m.stopOnce.Do(func() {
		m.d.setLeaving()
		_ = m.ml.UpdateNode(time.Second)
		_ = m.ml.Leave(2 * time.Second)
		_ = m.ml.Shutdown()
	})
}

// Kill shuts down without leaving, as a crash would (others see Dead). For tests.
func (m *Membership) Kill() {
	m.stopOnce.Do(func() { _ = m.ml.Shutdown() })
}

func withDefaultPort(hostport string) string {
	if _, _, err := net.SplitHostPort(hostport); err == nil {
		return hostport
	}
	return net.JoinHostPort(hostport, strconv.Itoa(DefaultPort))
}

func isKeyError(s string) bool {
	s = strings.ToLower(s)
	return strings.Contains(s, "no installed keys could decrypt") ||
		strings.Contains(s, "remote state is encrypted and encryption is not configured") ||
		strings.Contains(s, "encryption is configured but remote state is not encrypted") ||
		strings.Contains(s, "failed to decrypt")
}

// delegate receives memberlist's callbacks. They must not block.
type delegate struct {
	name string // the local member's
	log  *slog.Logger

	mu       sync.Mutex
	meta     []byte
	members  map[string]*Member
	rejected int64
	changed  chan struct{}
	// takenAddr is the address of another member that holds our name,
	// seen by NotifyConflict; "" when none.
	takenAddr string
}

// NotifyConflict implements memberlist.ConflictDelegate: two members claim
// one name at different addresses, and memberlist keeps the one it knew
// first. When the name is ours, the other member's address is recorded:
// during Start's join that means the cluster had the name before us (Start
// fails with a NameTakenError); later, it is a newcomer refused (logged).
func (d *delegate) NotifyConflict(existing, other *memberlist.Node) {
	if existing.Name != d.name {
		d.log.Warn("two gossip members claim one name; the second is ignored", "name", existing.Name,
			"first", net.JoinHostPort(existing.Addr.String(), strconv.Itoa(int(existing.Port))),
			"second", net.JoinHostPort(other.Addr.String(), strconv.Itoa(int(other.Port))))
		return
	}
	addr := net.JoinHostPort(other.Addr.String(), strconv.Itoa(int(other.Port)))
	d.mu.Lock()
	d.takenAddr = addr
	d.mu.Unlock()
	d.log.Warn("another member has our name", "name", d.name, "addr", addr)
}

func (d *delegate) takenBy() (string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.takenAddr, d.takenAddr != ""
}

func (d *delegate) NodeMeta(limit int) []byte {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.meta) > limit {
		return d.meta[:limit]
	}
	return d.meta
}
func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}

func (d *delegate) NotifyJoin(n *memberlist.Node)   { d.set(n, Alive) }
func (d *delegate) NotifyUpdate(n *memberlist.Node) { d.set(n, Alive) }
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	// memberlist reports both a graceful leave and a failure through
	// NotifyLeave; the Leaving flag a member sets before leaving tells
	// them apart.
	d.mu.Lock()
	prev := d.members[n.Name]
	d.mu.Unlock()
	if prev != nil && prev.Meta.Leaving {
		d.set(n, Left)
	} else {
		d.set(n, Dead)
	}
}

func (d *delegate) setLeaving() {
	d.mu.Lock()
	defer d.mu.Unlock()
	var m Meta
	_ = json.Unmarshal(d.meta, &m)
	m.Leaving = true
	d.meta, _ = json.Marshal(m)
}

func (d *delegate) set(n *memberlist.Node, st State) {
	var meta Meta
	if err := json.Unmarshal(n.Meta, &meta); err != nil {
		// json.Unmarshal fills what it can before an error: a member whose
		// metadata does not parse must not pass for a server.
		d.log.Warn("gossip member metadata does not parse; ignored", "member", n.Name, "err", err)
		meta = Meta{}
	}
	d.mu.Lock()
	prev, ok := d.members[n.Name]
	if ok && prev.Meta.Leaving && st != Alive {
		meta.Leaving = true
	}
	since := time.Now()
	if ok && prev.State == st {
		since = prev.Since
	}
	d.members[n.Name] = &Member{Name: n.Name, Addr: net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port))), Meta: meta, State: st, Since: since}
	d.mu.Unlock()
	d.notify()
}

func (d *delegate) notify() {
	select {
	case d.changed <- struct{}{}:
	default:
	}
}

// logWriter turns memberlist's log lines into slog records and notices
// messages from members with a different key.
type logWriter struct {
	log *slog.Logger
	d   *delegate
}

func (w *logWriter) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	if isKeyError(line) {
		w.d.mu.Lock()
		w.d.rejected++
		w.d.mu.Unlock()
		w.log.Warn("rejected gossip from a member with a different cluster token (wrong --token?)", "detail", line)
		return len(p), nil
	}
	w.log.Debug(line)
	return len(p), nil
}

var _ memberlist.Delegate = (*delegate)(nil)
var _ memberlist.EventDelegate = (*delegate)(nil)
var _ memberlist.ConflictDelegate = (*delegate)(nil)

// Join contacts more members (host or host:port) after Start, as a server
// does when it learns the other servers from the store. It returns how
// many answered; some not answering is not an error when one did.
func (m *Membership) Join(addrs []string) (int, error) {
	targets := make([]string, len(addrs))
	for i, a := range addrs {
		targets[i] = withDefaultPort(a)
	}
	n, err := m.ml.Join(targets)
	if n > 0 {
		return n, nil
	}
	if err != nil && isKeyError(err.Error()) {
		return 0, fmt.Errorf("join %s: %w", strings.Join(targets, ", "), ErrWrongToken)
	}
	if err == nil {
		err = errors.New("no member answered")
	}
	return 0, fmt.Errorf("join %s: %w", strings.Join(targets, ", "), err)
}
