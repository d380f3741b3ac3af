package tests

import (
	"fmt"
	"github.com/berthhq/berth/internal/testing/checkfor"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/ledger/ledgertest"
)

// BenchmarkParkStorm parks 3,000 aggregates through the binary (the
// notifier, whose service does not know their buyer: each parks at its
// first attempt), on a host that holds 0 and then 100,000 parked already
// (written by ledgertest.Fill while it was stopped), fsync on. Their
// events are appended while the subscription is paused; the time runs
// from the unpause to the last park. parks/s and the host's CPU per park
// (from /proc) are reported, with the restart's time to serving and to
// holding every parked aggregate (the storm starts after that); then a
// bulk resume of the storm at 5,000 a second (resumes/s over the job's
// life) and the host's RSS parked, at its peak and after the resumes.
//
//	go test ./tests -run '^$' -bench BenchmarkParkStorm -benchtime 1x
func BenchmarkParkStorm(b *testing.B) {
	const storm = 3000
	for _, base := range []int{0, 100_000} {
		b.Run(fmt.Sprintf("parked=%d", base), func(b *testing.B) {
			for b.Loop() {
				svc := newNotifier(b)
				svc.set("ghost", behaviour{Unknown: true})
				// Instances idle for 5 s are closed (and their memory
				// handed back), so that "after" is the host at rest.
				h := newHost(b, hostConfig{NotifyURL: svc.URL(), Extra: "[sandbox]\nidle-timeout = \"5s\"\n"})
				h.uploadNotifier(b, 201)
				h.Stop()
				if base > 0 {
					fillParked(b, h.Data, base)
				}
				start := time.Now()
				h = h.restart(b)
				b.ReportMetric(time.Since(start).Seconds()*1000, "restart-ms")
				h.awaitHeld(b)
				b.ReportMetric(time.Since(start).Seconds()*1000, "held-ms")
				sub := "/v1/subscriptions/" + ledgertest.ScaleSubscription
				before := h.subscription(b).Parked["waiting"]
				h.must(200, "POST", sub+"/pause", nil)
				h.appendShippedMany(b, "storm-%05d", storm, "ghost")
				cpu0 := processCPU(b, h.cmd.Process.Pid)
				start = time.Now()
				h.must(200, "POST", sub+"/unpause", nil)
				checkfor.Within(b, 5*time.Minute, func() error {
					if got := h.subscription(b).Parked["waiting"]; got < before+storm {
						return fmt.Errorf("%d waiting, want %d", got, before+storm)
					}
					return nil
				})
				took := time.Since(start)
				cpu := processCPU(b, h.cmd.Process.Pid) - cpu0
				b.ReportMetric(storm/took.Seconds(), "parks/s")
				b.ReportMetric(cpu.Seconds()*1000/storm, "cpu-ms/park")
				parkedRSS := processRSS(b, h.cmd.Process.Pid, "VmRSS")
				b.ReportMetric(parkedRSS, "rss-parked-MiB")

				// The service knows the buyer now: a bulk resume of the
				// storm at jobs.max-rate.
				svc.set("ghost", behaviour{})
				var j jobView
				h.must(201, "POST", "/v1/jobs", map[string]any{"action": "resume", "reason": "ghost imported", "rate": 5000,
					"filter": map[string]any{"subscriptions": []string{ledgertest.ScaleSubscription}, "message": "buyer ghost"}}).JSON(b, &j)
				checkfor.Within(b, 5*time.Minute, func() error {
					if j = h.job(b, j.ID); j.State != "done" {
						return fmt.Errorf("job %s, %d done", j.State, j.Done)
					}
					return nil
				})
				if j.Done != storm {
					b.Fatalf("the job resumed %d, want %d", j.Done, storm)
				}
				b.ReportMetric(float64(j.Done)/j.Finished.Sub(j.Created).Seconds(), "resumes/s")
				b.ReportMetric(processRSS(b, h.cmd.Process.Pid, "VmHWM"), "rss-peak-MiB")
				checkfor.Within(b, 5*time.Minute, func() error {
					if got := h.subscription(b).Parked["waiting"]; got != before {
						return fmt.Errorf("%d waiting, want %d", got, before)
					}
					return nil
				})
				// At rest again: the RSS once it is within 1.2x of the
				// parked host's, or what it is 30 s on.
				after := processRSS(b, h.cmd.Process.Pid, "VmRSS")
				for deadline := time.Now().Add(30 * time.Second); after > 1.2*parkedRSS && time.Now().Before(deadline); {
					time.Sleep(500 * time.Millisecond)
					after = processRSS(b, h.cmd.Process.Pid, "VmRSS")
				}
				b.ReportMetric(after, "rss-after-MiB")
			}
		})
	}
}

// processRSS is field (VmRSS, VmHWM) of pid's memory, in MiB.
func processRSS(b *testing.B, pid int, field string) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return float64(kb) / 1024
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// processCPU is the user and system time pid has used.
func processCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// After the command's ")" come fields 3 on; utime and stime are 14 and 15.
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ticks := 0
	for _, s := range f[11:13] {
		n, _ := strconv.Atoi(s)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}
