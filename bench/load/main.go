// Command load drives an armature serve instance with concurrent chat
// turns over HTTP and reports throughput and latency percentiles.
//
//	go run ./cmd/armature serve --data /tmp/load &
//	go run ./bench/load -url http://127.0.0.1:8080 -sessions 100 -duration 20s
//
// Each of -sessions sessions sends its turns one after another (a chat
// user waits for the reply); sessions run concurrently. -endpoint selects
// the surface: "openharness" (POST /v1/openharness, the default) or
// "rest" (POST /v1/sessions/{id}/messages).
//
// -url takes several base URLs, comma-separated, for replicas sharing a
// database (armature serve --database): with -spread turn (the default)
// each turn goes to the next replica, as behind a load balancer without
// affinity; with -spread session each session stays on one.
//
//	go run ./bench/load -url http://127.0.0.1:8081,http://127.0.0.1:8082,http://127.0.0.1:8083
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

func main() {
	url := flag.String("url", "http://127.0.0.1:8080", "server base URL")
	sessions := flag.Int("sessions", 100, "concurrent sessions")
	duration := flag.Duration("duration", 20*time.Second, "how long to run")
	endpoint := flag.String("endpoint", "openharness", "openharness or rest")
	token := flag.String("token", os.Getenv("ARMATURE_TOKEN"), "bearer token")
	spread := flag.String("spread", "turn", "with several -url: turn (each turn to the next) or session (a session stays on one)")
	flag.Parse()
	bases := strings.Split(*url, ",")
	if *spread != "turn" && *spread != "session" {
		fmt.Fprintln(os.Stderr, "load: -spread must be turn or session")
		os.Exit(2)
	}
	if err := run(bases, *spread == "turn", *endpoint, *token, *sessions, *duration); err != nil {
		fmt.Fprintln(os.Stderr, "load:", err)
		os.Exit(1)
	}
}

func run(bases []string, perTurn bool, endpoint, token string, sessions int, d time.Duration) error {
	tr := &http.Transport{MaxIdleConnsPerHost: sessions, MaxConnsPerHost: sessions}
	client := &http.Client{Transport: tr, Timeout: 30 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	run := fmt.Sprintf("%d", time.Now().UnixNano())
	var (
		mu        sync.Mutex
		latencies []time.Duration
		errs      atomic.Int64
		wg        sync.WaitGroup
	)
	start := time.Now()
	for i := range sessions {
		wg.Go(func() {
			sid := fmt.Sprintf("load-%s-%d", run, i)
			var local []time.Duration
			for n := 0; ctx.Err() == nil; n++ {
				k := i
				if perTurn {
					k += n
				}
				url, body := requestFor(strings.TrimRight(bases[k%len(bases)], "/"), endpoint, sid, n)
				req, err := http.NewRequest("POST", url, bytes.NewReader(body))
				if err != nil {
					errs.Add(1)
					return
				}
				req.Header.Set("Content-Type", "application/json")
				if token != "" {
					req.Header.Set("Authorization", "Bearer "+token)
				}
				t0 := time.Now()
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						errs.Add(1)
					}
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != 200 {
					errs.Add(1)
					continue
				}
				local = append(local, time.Since(t0))
			}
			mu.Lock()
			latencies = append(latencies, local...)
			mu.Unlock()
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	slices.Sort(latencies)
	if len(latencies) == 0 {
		return fmt.Errorf("no successful turns (%d errors)", errs.Load())
	}
	pct := func(p float64) time.Duration { return latencies[int(p*float64(len(latencies)-1))] }
	fmt.Printf("%d server(s), endpoint %s, %d sessions, %s: %d turns, %.0f turns/s, p50 %s, p99 %s, max %s, %d errors\n",
		len(bases), endpoint, sessions, elapsed.Round(time.Millisecond), len(latencies), float64(len(latencies))/elapsed.Seconds(),
		pct(0.50).Round(time.Microsecond), pct(0.99).Round(time.Microsecond), latencies[len(latencies)-1].Round(time.Microsecond), errs.Load())
	return nil
}

// requestFor builds turn n of session sid.
func requestFor(base, endpoint, sid string, n int) (string, []byte) {
	text := fmt.Sprintf("hello number %d", n)
	if endpoint == "rest" {
		b, _ := json.Marshal(map[string]string{"content": text})
		return base + "/v1/sessions/" + sid + "/messages", b
	}
	b, _ := json.Marshal(map[string]any{
		"protocol_version": "1.0.0",
		"request_id":       fmt.Sprintf("%s-%d", sid, n),
		"request": map[string]any{
			"context": map[string]any{"session_id": sid, "user_intent": text},
		},
	})
	return base + "/v1/openharness", b
}
