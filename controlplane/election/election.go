// Package election is leader election among skiff's servers: with
// several servers sharing one etcd, every server
// serves the API, but only one at a time, the leader, runs the scheduler
// and the controllers (two schedulers would bind the same free GPU twice;
// two ReplicaSet controllers would each create the missing pod). It is
// kube-controller-manager's --leader-elect, built on etcd's own election
// recipe (go.etcd.io/etcd/client/v3/concurrency) instead of a Lease object:
//
//   - A server campaigns by writing a key under ElectionPrefix, attached to
//     a lease of LeaderLeaseTTL that it keeps alive; the key with the
//     lowest creation revision leads, the others wait for it to go.
//   - A leader killed with -9 stops renewing: its lease expires after the
//     TTL, etcd deletes its key, and the next campaigner leads.
//   - Fencing by stepping down early: the leader stops its components as
//     soon as its lease has gone 2/3 of the TTL without a renewal (a
//     partition, a stalled etcd), while etcd keeps the lease (and so keeps
//     everyone else waiting) until the full TTL has passed since the last
//     renewal it granted. The bound, on this server's monotonic clock (no
//     clocks compared across machines): let S be when this server sent
//     the last renewal etcd answered (its own KeepAliveOnce, below). etcd
//     renewed after S, so it expires the lease no earlier than S + TTL
//     (etcd's leader counts the TTL from when it renews; a new etcd leader
//     extends leases, never shortens them; a TTL below etcd's minimum is
//     raised). The watchdog checks every TTL/20, so lead's context ends by
//     S + 2/3 TTL + TTL/20; lead has the remaining TTL/3 - TTL/20 (1.4 s
//     at the default 5 s) to stop its components before another server
//     can even win the campaign. A new leader therefore never starts while
//     the old one still acts, provided its components stop within that
//     margin (they stop on their context; the scheduler and controllers
//     finish the one request in flight) and the process is not frozen
//     (SIGSTOP, a VM paused) across it, which no lease can guard against.
//     The one gap is a write the old leader had already sent when it
//     stepped down, which lands or not, as any API client's.
//   - A leader that stops cleanly (Ctrl-C) revokes its lease: the next one
//     leads at once.
//
// The control plane (controlplane.Start, with an etcd store) runs one
// Elector; lead starts the scheduler, the controllers and the queue
// manager and stops them when its context ends. Who leads is served at
// api.LeaderPath (Current). Moved here from controlplane/election.go
// (issue 25).
package election

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"skiff.dev/skiff/api"
)

// Prefix is the etcd key prefix of the leader election.
const Prefix = "/skiff/leader/"

// Elector campaigns for leadership and runs lead while it holds it.
// Make one with New; Run it once. Leading is safe for concurrent use.
type Elector struct {
	cli  *clientv3.Client
	self api.LeaderInfo
	ttl  time.Duration
	log  *slog.Logger

	leading atomic.Bool
	mu      sync.Mutex
	terms   int // terms led, for the log
}

// New returns the elector of the server self, on cli, with leases of ttl
// (the time a dead leader keeps the leadership).
func New(cli *clientv3.Client, self api.LeaderInfo, ttl time.Duration, log *slog.Logger) *Elector {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Elector{cli: cli, self: self, ttl: ttl, log: log}
}

// Self is the server this elector campaigns for.
func (e *Elector) Self() api.LeaderInfo { return e.self }

// Run campaigns until ctx ends. Each time this server wins, lead runs with
// a context that ends when leadership is lost; lead must return soon after
// (it stops the components). An error from lead ends run with it; a lost
// election or an etcd error only starts a new campaign.
func (e *Elector) Run(ctx context.Context, lead func(context.Context) error) error {
	for ctx.Err() == nil {
		err := e.term(ctx, lead)
		var le *leadError
		if errors.As(err, &le) {
			return le.err
		}
		if err != nil && ctx.Err() == nil {
			e.log.Warn("leader election: campaigning again", "err", err)
			// Not a busy loop against an etcd that is down: wait a
			// little (or for ctx) before the next campaign.
			t := time.NewTimer(e.ttl / 5)
			select {
			case <-ctx.Done():
			case <-t.C:
			}
			t.Stop()
		}
	}
	return nil
}

// leadError is an error of lead itself, which ends run.
type leadError struct{ err error }

func (e *leadError) Error() string { return e.err.Error() }

// term is one campaign and, when won, one term as leader.
func (e *Elector) term(ctx context.Context, lead func(context.Context) error) error {
	secs := int64((e.ttl + time.Second - 1) / time.Second)
	// base is the origin of lastRenew, read before the grant is sent, on
	// the monotonic clock (time.Since), which wall clock steps do not move.
	base := time.Now()
	grant, err := e.cli.Grant(ctx, secs)
	if err != nil {
		return fmt.Errorf("grant lease: %w", err)
	}
	kaCtx, stopKA := context.WithCancel(ctx)
	defer stopKA()
	// lastRenew is when the last renewal etcd answered was sent, as
	// time.Since(base): what fencing counts from (see the package doc:
	// etcd keeps the lease until at least then + TTL). The time a reply
	// arrives would not do: etcd renewed before it, by an unknown delay.
	// The session's own KeepAlive renews too; it only makes the lease last
	// longer than this counts.
	var lastRenew atomic.Int64
	kaDone := make(chan struct{})
	go e.renew(kaCtx, grant.ID, base, &lastRenew, kaDone)
	sess, err := concurrency.NewSession(e.cli, concurrency.WithLease(grant.ID), concurrency.WithContext(kaCtx))
	if err != nil {
		return fmt.Errorf("start election session: %w", err)
	}
	defer func() {
		// Revoke: a clean stop hands over at once, not after the TTL.
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.ttl)
		defer cancel()
		sess.Orphan()
		_, _ = e.cli.Revoke(rctx, grant.ID)
	}()
	val, err := json.Marshal(e.self)
	if err != nil {
		return fmt.Errorf("encode leader info: %w", err)
	}
	el := concurrency.NewElection(sess, Prefix)
	campaignCtx, stopCampaign := context.WithCancel(ctx)
	defer stopCampaign()
	go func() {
		// A lease lost while waiting ends the campaign too.
		select {
		case <-kaDone:
			stopCampaign()
		case <-campaignCtx.Done():
		}
	}()
	if err := el.Campaign(campaignCtx, string(val)); err != nil {
		return fmt.Errorf("campaign: %w", err)
	}

	limit := e.ttl * 2 / 3
	if since := time.Since(base) - time.Duration(lastRenew.Load()); since > limit {
		// Won with a lease that may be about to expire (renewals failed
		// while campaigning): not a term to start.
		return fmt.Errorf("campaign won, but the lease was not renewed for %v", since.Round(time.Millisecond))
	}
	leadCtx, stepDown := context.WithCancel(ctx)
	defer stepDown()
	why := make(chan string, 1)
	go e.watchdog(leadCtx, stepDown, kaDone, base, &lastRenew, limit, why)
	e.mu.Lock()
	e.terms++
	term := e.terms
	e.mu.Unlock()
	e.leading.Store(true)
	e.log.Info("leading: this server runs the scheduler and the controllers", "leader", e.self.Name, "term", term, "lease", fmt.Sprintf("%x", grant.ID))
	err = lead(leadCtx)
	e.leading.Store(false)
	reason := "shutting down"
	select {
	case r := <-why:
		reason = r
	default:
	}
	e.log.Info("stopped leading", "leader", e.self.Name, "term", term, "reason", reason)
	if err != nil && !errors.Is(err, context.Canceled) {
		return &leadError{err}
	}
	return nil
}

// renew keeps the lease alive until ctx ends or the lease is gone (then it
// closes done): every TTL/6, each try bounded by as much, so a renewal
// lost (a blip of up to about TTL/2) does not yet cost the term. It
// stores in lastRenew when the last renewal etcd answered was sent (term
// says why that time).
func (e *Elector) renew(ctx context.Context, lease clientv3.LeaseID, base time.Time, lastRenew *atomic.Int64, done chan<- struct{}) {
	defer close(done)
	every := e.ttl / 6
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		sent := time.Since(base)
		rctx, cancel := context.WithTimeout(ctx, every)
		_, err := e.cli.KeepAliveOnce(rctx, lease)
		cancel()
		switch {
		case err == nil:
			lastRenew.Store(int64(sent))
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return // expired: the term is over
		case e.cli.Ctx().Err() != nil:
			return // the client is closed: no renewal will come
		}
		// Any other error: try again; the watchdog steps down in time.
	}
}

// watchdog steps down (stepDown, with the reason on why) when the lease
// could not be kept alive (renewed closed) or was not renewed for limit,
// checking every TTL/20, until ctx ends.
func (e *Elector) watchdog(ctx context.Context, stepDown func(), renewed <-chan struct{}, base time.Time, lastRenew *atomic.Int64, limit time.Duration, why chan<- string) {
	tick := time.NewTicker(e.ttl / 20)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-renewed:
			why <- "the lease could not be kept alive"
			stepDown()
			return
		case <-tick.C:
			if since := time.Since(base) - time.Duration(lastRenew.Load()); since > limit {
				why <- fmt.Sprintf("the lease was not renewed for %v", since.Round(time.Millisecond))
				stepDown()
				return
			}
		}
	}
}

// Leading reports whether this server leads now.
func (e *Elector) Leading() bool { return e.leading.Load() }

// Current reads who leads: the election key with the lowest creation
// revision. ok is false when nobody does.
func Current(ctx context.Context, cli *clientv3.Client) (api.LeaderInfo, bool, error) {
	resp, err := cli.Get(ctx, Prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return api.LeaderInfo{}, false, fmt.Errorf("read leader: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return api.LeaderInfo{}, false, nil
	}
	var li api.LeaderInfo
	if err := json.Unmarshal(resp.Kvs[0].Value, &li); err != nil {
		return api.LeaderInfo{}, false, fmt.Errorf("decode leader %q: %w", resp.Kvs[0].Value, err)
	}
	return li, true, nil
}
