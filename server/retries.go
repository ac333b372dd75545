package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/armature-go/armature/internal/uuid"
	"github.com/armature-go/armature/runtime"
)

// RetryCountHeader is the request header in which the official OpenAI
// SDKs (Node, Python, Go, and the other Stainless-generated clients)
// number a request's attempts: 0 on the first, 1 and on for the
// retries they make on their own after a timeout, a dropped connection,
// a 408, 409, 429 or 5xx, with the same body and no Idempotency-Key.
const RetryCountHeader = "X-Stainless-Retry-Count"

// Bounds of clientRetries.
const (
	// clientRetryWindow is how long a first attempt is remembered: the
	// SDKs' default timeout (10 minutes) and their backoff, with room.
	clientRetryWindow = 15 * time.Minute
	// clientRetryEntries bounds the attempts remembered (about 400 bytes
	// each with the map's and the list's share, 26 MB at the bound, as
	// measured); past it the oldest are forgotten first.
	clientRetryEntries = 1 << 16
)

// clientRetries recognizes the automatic retries of the official OpenAI
// SDKs on the OpenAI endpoints, which send no Idempotency-Key: a
// request whose RetryCountHeader says it is a retry, from the same
// tenant with the same path, session header and body as a first attempt
// this server took within clientRetryWindow, is a retransmission of it.
// Each first attempt is given an implicit message id (and, without a
// session, the session that id names), so the retry joins the turn
// still running or answers its recorded outcome, as with an
// Idempotency-Key, instead of running the turn (and its tools) again.
// The record lives in this process; a retry another replica takes finds
// its first attempt in the run records (Server.recordedAttempt): the
// run's message id is the implicit key, found by its prefix through the
// run store's index, however many runs the tenant started since. When
// two first attempts share a print (two users of one app sending the
// same first message), a retry of either runs a turn of its own: it
// cannot be told whose it is, and joining the other user's would hand
// it that user's answer and session. Safe for concurrent use.
type clientRetries struct {
	now func() time.Time

	mu sync.Mutex
	m  map[retryPrint]retryEntry
	// order lists the prints in the order they were taken, to forget the
	// oldest first (an entry taken again is listed again; the older
	// listing is skipped: its seq is not the entry's).
	order []retryListing
	seq   uint64
}

// retryPrint identifies an attempt: its tenant and a digest of its path,
// session header and body.
type retryPrint struct {
	tenant string
	sum    [sha256.Size]byte
	// sessioned is set when the attempt names its session (the session
	// header): its first attempts are one conversation's, whose retries
	// join the latest of them (see clientRetries.key).
	sessioned bool
}

type retryEntry struct {
	key string
	seq uint64
	at  time.Time // when the first attempt was taken
	// shared is set when two first attempts of the print came within
	// the window: two users of one tenant (one app's token) sending the
	// same first message, say. A retry of either then cannot be told
	// from a retry of the other, and joining the wrong one would hand
	// one user the other's turn and session: it runs a turn of its own.
	shared bool
}

type retryListing struct {
	p   retryPrint
	seq uint64
	at  time.Time
}

func newClientRetries(now func() time.Time) *clientRetries {
	return &clientRetries{now: now, m: map[retryPrint]retryEntry{}}
}

// retryAttempt is the attempt number r's RetryCountHeader gives, or -1
// when it gives none (a client that is not an official SDK, or a value
// that is not a number).
func retryAttempt(r *http.Request) int {
	v := r.Header.Get(RetryCountHeader)
	if v == "" {
		return -1
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// key returns the message id of an OpenAI turn request that carries no
// Idempotency-Key: the first attempt's for a retry of one this server
// remembers, a new one for a first attempt of an official SDK
// (remembered for its retries), "" for any other request. For a retry
// this server does not remember (another replica took the first
// attempt, or this one before a restart), it returns a new key and
// lookup set: the caller looks for the first attempt's key in the run
// records (recordedAttempt), by the print's tag, which every key made
// here carries ("retry-<tag>-<uuid>").
//
// A retry of a first attempt that named its session joins the latest
// first attempt of the print: this server's, unless the run records
// hold a later one another replica took (lookup is set, and since is
// when this server's was taken). A retry of a print without a session
// that two first attempts share runs a turn of its own (see
// retryEntry.shared).
func (c *clientRetries) key(r *http.Request, tenant string, body []byte) (key string, p retryPrint, lookup bool, since time.Time) {
	attempt := retryAttempt(r)
	if attempt < 0 {
		return "", p, false, since
	}
	p.sessioned = r.Header.Get(SessionHeader) != ""
	h := sha256.New()
	for _, part := range []string{r.URL.Path, r.Header.Get(SessionHeader)} {
		h.Write([]byte(part))
		h.Write([]byte{0})
	}
	h.Write(body)
	p.tenant = tenant
	h.Sum(p.sum[:0])
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.forget(now)
	e, ok := c.m[p]
	key = "retry-" + p.tag() + "-" + uuid.New()
	switch {
	case ok && attempt > 0 && p.sessioned:
		// One conversation's: this server's first attempt, unless
		// another replica took a later one.
		return e.key, p, true, e.at
	case ok && attempt > 0 && !e.shared:
		return e.key, p, false, since
	case ok && attempt > 0:
		// A retry of a print two first attempts share: whose, nobody
		// can tell. It runs a turn of its own, under a key of its own
		// (not remembered: the print stays shared).
		return key, p, false, since
	}
	// A first attempt, or a retry of one this server does not remember:
	// a turn of its own unless the lookup finds the first attempt's. The
	// same body sent again as a new request is a first attempt too: it
	// runs; without a session, the print is shared from then on (see
	// retryEntry), with one, its retries join the later.
	c.remember(p, key, now, ok && attempt == 0 && !p.sessioned)
	return key, p, attempt > 0, since
}

// share marks print p shared (see retryEntry): the run records hold
// more than one first attempt of it.
func (c *clientRetries) share(p retryPrint) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.m[p]; ok {
		e.shared = true
		c.m[p] = e
	}
}

// tag is the part of every implicit key of print p that names it.
func (p retryPrint) tag() string { return hex.EncodeToString(p.sum[:retryTagBytes]) }

// adopt records key, found in the run records, as print p's: the later
// retries this server takes join the same turn.
func (c *clientRetries) adopt(p retryPrint, key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remember(p, key, c.now(), false)
}

// remember records key as print p's, taken at now; shared marks it
// shared, as it stays once it is. c.mu is held.
func (c *clientRetries) remember(p retryPrint, key string, now time.Time, shared bool) {
	c.seq++
	c.m[p] = retryEntry{key: key, seq: c.seq, at: now, shared: shared || c.m[p].shared}
	c.order = append(c.order, retryListing{p: p, seq: c.seq, at: now})
}

// retryTagBytes is how many bytes of a print's digest an implicit key
// carries, in hex: enough that two requests of one tenant within the
// window never share a tag by chance.
const retryTagBytes = 12

// retryLookup is the page size of recordedAttempt's listing: a built-in
// store lists the runs of the print only, the newest first; a store that
// ignores the prefix filter (runtime.ListRunsRequest.MessageIDPrefix)
// lists its newest runs, which recordedAttempt checks.
const retryLookup = 4

// recordedAttempt returns the message id of the run of the tenant begun
// within clientRetryWindow under an implicit key of print p ("" when
// none): the first attempt of a retry that another replica took, found
// in the run records all replicas share, by the key's prefix
// (Run.MessageID, through the store's index: one query, however many
// runs the tenant started since). Only a retry this server does not
// remember pays for it. shared reports runs of more than one implicit
// key of the print (see retryEntry): the retry is then nobody's to
// join, and the id is "".
//
// For a print that names its session, the newest run's key is the
// answer (one conversation's first attempts: its retries join the
// latest), with its start, and shared is never set.
func (s *Server) recordedAttempt(ctx context.Context, tenant string, p retryPrint) (id string, at time.Time, shared bool) {
	prefix := "retry-" + p.tag() + "-"
	resp, err := s.runs.Store().ListRuns(ctx, runtime.ListRunsRequest{Tenant: tenant, MessageIDPrefix: prefix, PageSize: retryLookup})
	if err != nil {
		return "", at, false
	}
	since := s.retries.now().Add(-clientRetryWindow)
	for _, run := range resp.Runs {
		if run.Tenant != tenant || !strings.HasPrefix(run.MessageID, prefix) || run.StartedAt.Before(since) {
			continue
		}
		if p.sessioned {
			return run.MessageID, run.StartedAt, false // the newest
		}
		if id != "" && run.MessageID != id {
			return "", at, true
		}
		id, at = run.MessageID, run.StartedAt
	}
	return id, at, false
}

// retryKey is the implicit message id of an OpenAI turn request without
// an Idempotency-Key (see clientRetries), looked for in the run records
// for a retry this server does not remember.
func (s *Server) retryKey(r *http.Request, tenant string, body []byte) string {
	key, p, lookup, local := s.retries.key(r, tenant, body)
	if !lookup {
		return key
	}
	first, at, shared := s.recordedAttempt(r.Context(), tenant, p)
	switch {
	case shared:
		s.retries.share(p)
	case first != "" && first != key && (local.IsZero() || at.After(local)):
		// Another replica's first attempt, and (of one conversation's)
		// later than this server's.
		s.retries.adopt(p, first)
		return first
	}
	return key
}

// forget drops the attempts older than clientRetryWindow, and the
// oldest past clientRetryEntries. The listings of a print taken again
// since are dropped on the way, and all at once when they outnumber
// the entries, so that the same request sent over and over does not
// grow the list.
func (c *clientRetries) forget(now time.Time) {
	n := 0
	for ; n < len(c.order); n++ {
		l := c.order[n]
		e, ok := c.m[l.p]
		live := ok && e.seq == l.seq
		if live && now.Sub(l.at) < clientRetryWindow && len(c.m) < clientRetryEntries {
			break
		}
		if live {
			delete(c.m, l.p)
		}
	}
	c.order = c.order[n:]
	if len(c.order) > 2*len(c.m)+64 {
		kept := make([]retryListing, 0, len(c.m)+64)
		for _, l := range c.order {
			if e, ok := c.m[l.p]; ok && e.seq == l.seq {
				kept = append(kept, l)
			}
		}
		c.order = kept
	}
}
