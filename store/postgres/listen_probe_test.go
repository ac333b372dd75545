package postgres_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/armature-go/armature/runtime"
	"github.com/armature-go/armature/store/postgres"
)

// blackholeProxy forwards TCP connections to PostgreSQL; dropPath makes
// the connections open at that moment silently lose everything from
// then on (both ways, the sockets staying open: a half-open path after
// a NAT timeout, a failover or a partition), while new connections
// work.
type blackholeProxy struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []*atomic.Bool
	closed []net.Conn
}

func newBlackholeProxy(t *testing.T, addr, target string) *blackholeProxy {
	t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	p := &blackholeProxy{ln: ln, target: target}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			dead := &atomic.Bool{}
			p.mu.Lock()
			p.conns = append(p.conns, dead)
			p.closed = append(p.closed, c, up)
			p.mu.Unlock()
			pipe := func(dst, src net.Conn) {
				buf := make([]byte, 32<<10)
				for {
					n, err := src.Read(buf)
					if n > 0 && !dead.Load() {
						if _, werr := dst.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						if err != io.EOF {
							return
						}
						return
					}
				}
			}
			go pipe(up, c)
			go pipe(c, up)
		}
	}()
	return p
}

func (p *blackholeProxy) dropPath() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, d := range p.conns {
		d.Store(true)
	}
}

func (p *blackholeProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.closed {
		c.Close()
	}
}

// A replica whose watch-announcement listener sits on a connection
// whose path died silently (no RST: the client sees no error, the
// server's backend never learns either) must notice and listen again,
// as the replica does for its liveness lock ("within about 10 s",
// README): the connection, silent for listenProbe, is pinged, and given
// up when the ping goes unanswered. Before, it never again heard that a
// session is watched elsewhere, for as long as the process lived, while
// /readyz said ready.
func TestStaleWatchListenerListensAgain(t *testing.T) {
	a := open(t)
	u, err := url.Parse(dbURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := newBlackholeProxy(t, "127.0.0.1:0", u.Host)
	pu := *u
	pu.Host = proxy.ln.Addr().String()
	b, err := postgres.Open(t.Context(), postgres.Config{URL: pu.String(), Schema: a.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	t.Cleanup(proxy.close) // runs before b.Close

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	heard := make(chan string, 1024)
	go func() {
		_ = b.ListenWatches(ctx, func(tenant, sessionID string) {
			select {
			case heard <- tenant + "/" + sessionID:
			default:
			}
		})
	}()
	announceUntilHeard := func(id string, within time.Duration) (time.Duration, bool) {
		start := time.Now()
		for time.Since(start) < within {
			if err := a.AnnounceWatch(ctx, []runtime.SessionRef{{Tenant: "acme", SessionID: id}}); err != nil {
				t.Fatal(err)
			}
			select {
			case h := <-heard:
				if h == "acme/"+id {
					return time.Since(start), true
				}
			case <-time.After(200 * time.Millisecond):
			}
		}
		return within, false
	}
	if _, ok := announceUntilHeard("before", 10*time.Second); !ok {
		t.Fatal("b never heard a's announcement before the path died")
	}

	proxy.dropPath() // every connection b has now is dead; new ones work

	// WatchTTL (30 s) is how long an announcement counts: the watcher's
	// replica re-announces every 10 s; a listener deaf for longer than
	// that has dropped every watched session.
	var ready atomic.Bool
	go func() {
		for ctx.Err() == nil {
			pctx, c := context.WithTimeout(ctx, 2*time.Second)
			if b.Ping(pctx) == nil {
				ready.Store(true)
			}
			c()
			time.Sleep(time.Second)
		}
	}()
	if took, ok := announceUntilHeard("after", 35*time.Second); !ok {
		t.Fatalf("35 s (more than server.WatchTTL) after the listener's path died, b still hears no watch announcement "+
			"(its listener waits on the dead connection forever; b ready meanwhile: %v)", ready.Load())
	} else {
		t.Logf("b heard again after %v", took)
	}
}

// The same for the event notifications a server's session event streams
// wake on (server.EventNotifier): a replica whose events listener sits
// on a dead path never again wakes its streams for another replica's
// turns (GET /v1/sessions/{id}/events there stayed silent but for its
// keep-alives, so neither EventSource nor the chat page's watchdog
// reconnected); it listens again as soon.
func TestStaleEventListenerListensAgain(t *testing.T) {
	a := open(t)
	u, err := url.Parse(dbURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := newBlackholeProxy(t, "127.0.0.1:0", u.Host)
	pu := *u
	pu.Host = proxy.ln.Addr().String()
	b, err := postgres.Open(t.Context(), postgres.Config{URL: pu.String(), Schema: a.Schema()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	t.Cleanup(proxy.close)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	heard := make(chan string, 1024)
	go func() {
		_ = b.Listen(ctx, func(tenant, sessionID string) {
			select {
			case heard <- tenant + "/" + sessionID:
			default:
			}
		})
	}()
	runs := a.Runs()
	writeUntilHeard := func(run string, within time.Duration) bool {
		if err := runs.StartRun(ctx, runtime.Run{Tenant: "acme", ID: run, SessionID: run, AgentID: "a"}); err != nil {
			t.Fatal(err)
		}
		for start := time.Now(); time.Since(start) < within; {
			if _, err := runs.Append(ctx, runtime.AppendRequest{Tenant: "acme", RunID: run, Events: []runtime.Event{{Type: "x.test"}}}); err != nil {
				t.Fatal(err)
			}
			select {
			case h := <-heard:
				if h == "acme/"+run {
					return true
				}
			case <-time.After(300 * time.Millisecond):
			}
		}
		return false
	}
	if !writeUntilHeard("before", 10*time.Second) {
		t.Fatal("b never heard a's events before the path died")
	}
	proxy.dropPath()
	if !writeUntilHeard("after", 35*time.Second) {
		t.Fatal("35 s after its listener's path died, b still hears no notice of events another replica stores")
	}
}
