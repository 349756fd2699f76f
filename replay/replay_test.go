package replay

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tollgate/tollgate/bucket"
	"github.com/tollgate/tollgate/config"
	"github.com/tollgate/tollgate/quota"
	"github.com/tollgate/tollgate/replay/ctgen"
	"github.com/tollgate/tollgate/servicequotas"
	"github.com/tollgate/tollgate/sim"
)

var t0 = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// The acceptance shape: one tenant bursting 300 DescribeClusters in one
// second every minute, another steady at 25 a second, for ten minutes,
// on ECS's cluster-read bucket (50 tokens, 20 per second).
var acceptance = ctgen.Spec{Start: t0, Duration: 10 * time.Minute, Tenants: []ctgen.Tenant{
	{Account: "111122223333", AccessKey: "AKIABURST", Action: "DescribeClusters", Burst: 300, Every: time.Minute},
	{Account: "444455556666", AccessKey: "AKIASTEADY", Action: "ListClusters", Rate: 25},
}}

func gen(t testing.TB, s ctgen.Spec) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := ctgen.Write(&b, s); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func input(name string, b []byte) Input {
	return Input{Name: name, Size: int64(len(b)), Open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(b)), nil
	}}
}

func bucketOf(t *testing.T, r *Report, account string) Bucket {
	t.Helper()
	for _, b := range r.Buckets {
		if b.Account == account {
			return b
		}
	}
	t.Fatalf("no bucket of account %s in %+v", account, r.Buckets)
	return Bucket{}
}

func noRetries() []Group { return []Group{{Name: "no retries", Retry: sim.Retry{Disabled: true}}} }

// The bucket arithmetic, by hand. The burst: each minute 50 of 300 pass
// (the bucket is full again after 60 s), 250 throttled, ten times. The
// steady tenant: 25 a second drains 5 tokens a second from 50, so seconds
// 0-5 pass whole, and from second 6 on 20 pass and 5 are throttled:
// 5 × 594 = 2,970.
func TestReplayGivesTheBucketArithmetic(t *testing.T) {
	r, err := Run([]Input{input("a.json", gen(t, acceptance))}, Options{Groups: noRetries()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Records != 3000+15000 || r.Replayed != r.Records || r.Skipped != 0 || len(r.Errors) != 0 {
		t.Fatalf("report counts %+v", r)
	}
	burst, steady := bucketOf(t, r, "111122223333"), bucketOf(t, r, "444455556666")
	if burst.Calls != 3000 || burst.Throttled != 2500 || burst.Failed != 2500 {
		t.Errorf("burst tenant: %d calls, %d throttled, %d failed; want 3000, 2500, 2500", burst.Calls, burst.Throttled, burst.Failed)
	}
	if steady.Calls != 15000 || steady.Throttled != 2970 {
		t.Errorf("steady tenant: %d calls, %d throttled; want 15000, 2970", steady.Calls, steady.Throttled)
	}
	if !burst.FirstMinute.Equal(t0) || burst.WorstCount != 250 || burst.ThrottledMinutes != 10 {
		t.Errorf("burst tenant's minutes: first %v, worst %v (%d), %d minutes", burst.FirstMinute, burst.WorstMinute, burst.WorstCount, burst.ThrottledMinutes)
	}
	if !steady.FirstMinute.Equal(t0) || steady.WorstCount != 300 || !steady.WorstMinute.Equal(t0.Add(time.Minute)) {
		t.Errorf("steady tenant's worst minute %v (%d), want 12:01 (300)", steady.WorstMinute, steady.WorstCount)
	}
	// The smallest limits, by hand: 300 at once every minute need a burst
	// of 300 refilled within the minute, 5 a second. 25 a second for 600
	// seconds with a burst of 50 need an interval of at most
	// 599 s / (25 × 600 − 25 − 50) (the longest busy span, from the first
	// second to the last), 40,066,889 ns: 24.9582642 a second.
	if burst.BurstAtRate != 300 || burst.AdmitBurst != 300 || burst.AdmitRate != 5 {
		t.Errorf("burst tenant admitted by %d at 20/s, recommended %d/%g; want 300, 300/5", burst.BurstAtRate, burst.AdmitBurst, burst.AdmitRate)
	}
	if steady.AdmitBurst != 50 || steady.AdmitRate != 24.9582642 {
		t.Errorf("steady tenant recommended %d/%v, want 50/24.9582642", steady.AdmitBurst, steady.AdmitRate)
	}
	// At 20/s the ten minutes need a burst of 3,020 (6 × 25 + 2,870 owed)
	// for all, 3,005 for 99.9 % (15 throttles of 15,000). 99.9 % of the
	// burst tenant's 3,000 calls (3 throttles) need 5 a second too: a hair
	// slower loses one call a minute, 9 in all.
	if steady.BurstAtRate != 3020 || steady.Burst999 != 3005 || burst.Rate999 != 5 {
		t.Errorf("99.9 %%: steady tenant burst %d (all: %d) at 20/s; burst tenant rate %g at 300; want 3005 (3020), 5",
			steady.Burst999, steady.BurstAtRate, burst.Rate999)
	}

	// The overrides, pasted into a config, admit every call.
	var ov bytes.Buffer
	if err := r.WriteOverrides(&ov); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse("overrides.yaml", []byte("services:\n  - preset: ecs\n"+ov.String()))
	if err != nil {
		t.Fatalf("the overrides do not parse: %v\n%s", err, ov.String())
	}
	again, err := Run([]Input{input("a.json", gen(t, acceptance))}, Options{Quota: cfg.Quota, Groups: noRetries()})
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range again.Buckets {
		if b.Throttled != 0 || b.Failed != 0 {
			t.Errorf("with the overrides %s: %d throttled, %d failed; want none\n%s", b.Account, b.Throttled, b.Failed, ov.String())
		}
	}
}

// With the default retries (1+r, 2+r, 4+r … s), the burst's throttled
// calls pass over the next seconds: none fails, but the attempts exceed
// the calls. The steady tenant's group does not retry.
func TestReplayRetriesAsTheGroupSays(t *testing.T) {
	groups := []Group{
		{Name: "sdk", Accounts: []string{"111122223333"}},
		{Name: "rest", Retry: sim.Retry{Disabled: true}},
	}
	r, err := Run([]Input{input("a.json", gen(t, acceptance))}, Options{Groups: groups, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	burst, steady := bucketOf(t, r, "111122223333"), bucketOf(t, r, "444455556666")
	if burst.Group != "sdk" || steady.Group != "rest" {
		t.Fatalf("groups %q, %q; want sdk, rest", burst.Group, steady.Group)
	}
	if burst.Throttled != 2500 || burst.Failed != 0 || burst.Attempts <= 3000 || burst.ThrottledAttempts < 2500 {
		t.Errorf("burst tenant with retries: %+v; want 2500 throttled without, none failed, more attempts than calls", burst)
	}
	if steady.Failed != steady.Throttled {
		t.Errorf("steady tenant without retries: %d failed, %d throttled", steady.Failed, steady.Throttled)
	}
}

// Files in any order and any form — gzipped, a Records file, an export of
// one record a line — give the report of one file: each covers its own
// span, and the replay plays them by time.
func TestReplayMergesFilesByTime(t *testing.T) {
	var ins []Input
	for i := 9; i >= 0; i-- { // ten files of a minute each, newest first
		s := acceptance
		s.Start, s.Duration, s.Lines = t0.Add(time.Duration(i)*time.Minute), time.Minute, i%3 == 1
		b := gen(t, s)
		if i%2 == 0 {
			b = gz(t, b)
		}
		ins = append(ins, input(fmt.Sprintf("part-%d", i), b))
	}
	r, err := Run(ins, Options{Groups: noRetries()})
	if err != nil {
		t.Fatal(err)
	}
	if r.Inputs != 10 || len(r.Inexact) != 0 || len(r.Errors) != 0 {
		t.Fatalf("inputs %d, inexact %v, errors %v", r.Inputs, r.Inexact, r.Errors)
	}
	if b := bucketOf(t, r, "444455556666"); b.Throttled != 2970 {
		t.Errorf("steady tenant over ten files: %d throttled, want 2970", b.Throttled)
	}
	if b := bucketOf(t, r, "111122223333"); b.Throttled != 2500 {
		t.Errorf("burst tenant over ten files: %d throttled, want 2500", b.Throttled)
	}
}

// The log's own throttling errors are counted beside the replay's, not
// played; unknown services and actions are counted by name.
func TestReplayCountsWhatItDoesNotPlay(t *testing.T) {
	s := ctgen.Spec{Start: t0, Duration: 3 * time.Second, Tenants: []ctgen.Tenant{
		{Account: "111122223333", Action: "DescribeClusters", Rate: 2},
		{Account: "111122223333", Action: "DescribeClusters", Rate: 1, ErrorCode: "ThrottlingException"},
		{Account: "111122223333", Action: "PutObject", Source: "s3.amazonaws.com", Rate: 1},
		{Account: "111122223333", Action: "MakeCoffee", Rate: 1},
	}}
	r, err := Run([]Input{input("a.json", gen(t, s))}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	b := bucketOf(t, r, "111122223333")
	if b.Calls != 6 || b.Recorded != 3 || r.Replayed != 6 {
		t.Errorf("calls %d, recorded throttles %d, replayed %d; want 6, 3, 6", b.Calls, b.Recorded, r.Replayed)
	}
	if r.UnknownServices["s3.amazonaws.com"] != 3 || r.UnknownActions["ecs MakeCoffee"] != 3 {
		t.Errorf("unknown services %v, actions %v", r.UnknownServices, r.UnknownActions)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"s3.amazonaws.com 3", "ecs MakeCoffee 3", "111122223333"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text report lacks %q:\n%s", want, text.String())
		}
	}
}

// Options.Limits replaces the config's limit, as an approved increase
// does; a bucket whose region a config cannot name gets no override line.
func TestReplayLimitsAndOverridesAConfigCanName(t *testing.T) {
	s := acceptance
	s.Tenants = []ctgen.Tenant{acceptance.Tenants[0], {Account: "444455556666", Region: "Mars", Action: "ListClusters", Burst: 80}}
	r, err := Run([]Input{input("a.json", gen(t, s))}, Options{
		Groups: noRetries(),
		Limits: func(k quota.Key, l bucket.Limit) bucket.Limit {
			if k.Account == "111122223333" {
				return bucket.MustLimit(300, 20)
			}
			return l
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	if b := bucketOf(t, r, "111122223333"); b.Throttled != 0 || b.Burst != 300 {
		t.Errorf("with an increase to 300/20: %d throttled, burst %d", b.Throttled, b.Burst)
	}
	if b := bucketOf(t, r, "444455556666"); b.Throttled != 30 || b.NeedsOverride() {
		t.Errorf("region Mars: %d throttled (want 30), override %v (want none)", b.Throttled, b.NeedsOverride())
	}
	var ov bytes.Buffer
	if err := r.WriteOverrides(&ov); err != nil || ov.Len() != 0 {
		t.Errorf("overrides %q, %v; want none", ov.String(), err)
	}
}

// Applied values, as the admin API lists them, raise the burst tenant's
// burst to 300: none of its calls is throttled.
func TestReplayWithAppliedValues(t *testing.T) {
	cfg := quota.Default()
	js := fmt.Sprintf(`{"applied":[{"account":"111122223333","region":"us-east-1","service_code":"ecs","quota_code":%q,"value":300}]}`,
		servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst))
	applied, err := ReadApplied(strings.NewReader(js))
	if err != nil {
		t.Fatal(err)
	}
	limits, err := AppliedLimits(cfg, applied)
	if err != nil {
		t.Fatal(err)
	}
	r, err := Run([]Input{input("a.json", gen(t, acceptance))}, Options{Quota: cfg, Limits: limits, Groups: noRetries()})
	if err != nil {
		t.Fatal(err)
	}
	if b := bucketOf(t, r, "111122223333"); b.Throttled != 0 || b.Burst != 300 || b.Rate != 20 {
		t.Errorf("with 300 applied: %d throttled, limit %d/%g", b.Throttled, b.Burst, b.Rate)
	}
	if b := bucketOf(t, r, "444455556666"); b.Throttled != 2970 {
		t.Errorf("the other tenant: %d throttled, want 2970", b.Throttled)
	}
	for _, bad := range []string{`[]`, `{"applied":[{"service_code":"ecs","quota_code":"L-0","value":1}]}`, `{"applied":[{"service_code":"ecs","quota_code":"` + servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Rate) + `","value":-1}]}`} {
		a, err := ReadApplied(strings.NewReader(bad))
		if err == nil {
			_, err = AppliedLimits(cfg, a)
		}
		if err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// Files walks directories in name order, past hidden files and
// CloudTrail's digests.
func TestFilesSkipsDigestsAndHiddenFiles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"b/2.json.gz", "a.json", ".hidden", "CloudTrail-Digest/us-east-1/d.json.gz", "b/111122223333_CloudTrail-Digest_us-east-1_x.json.gz"} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("{}"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, err := Files([]string{dir})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, i := range in {
		rel, _ := filepath.Rel(dir, i.Name)
		got = append(got, filepath.ToSlash(rel))
	}
	if strings.Join(got, " ") != "a.json b/2.json.gz" {
		t.Errorf("files %q, want a.json b/2.json.gz", got)
	}
	if _, err := Files([]string{t.TempDir()}); err == nil {
		t.Error("an empty directory: no error")
	}
}

// One bucket's calls split over two files that overlap in time (even and
// odd seconds) are sorted and give the arithmetic of one file; a record
// far older than the last read is sorted in too.
func TestReplaySortsOverlappingFiles(t *testing.T) {
	steady := ctgen.Spec{Start: t0, Duration: 10 * time.Minute, Tenants: []ctgen.Tenant{{Account: "444455556666", Action: "ListClusters", Rate: 25}}}
	var lines [2][]string
	for i, l := range strings.Split(strings.TrimSpace(string(gen(t, ctgen.Spec{Start: steady.Start, Duration: steady.Duration, Tenants: steady.Tenants, Lines: true}))), "\n") {
		lines[(i/25)%2] = append(lines[(i/25)%2], l)
	}
	r, err := Run([]Input{
		input("odd.jsonl", []byte(strings.Join(lines[1], "\n"))),
		input("even.jsonl", []byte(strings.Join(lines[0], "\n"))),
	}, Options{Groups: noRetries()})
	if err != nil {
		t.Fatal(err)
	}
	if b := bucketOf(t, r, "444455556666"); b.Calls != 15000 || b.Throttled != 2970 {
		t.Errorf("over two overlapping files: %d calls, %d throttled; want 15000, 2970", b.Calls, b.Throttled)
	}

	// Thirty minutes from 12:00, then a record of 11:50: played first.
	half := ctgen.Spec{Start: t0, Duration: 30 * time.Minute, Lines: true, Tenants: []ctgen.Tenant{{Account: "111122223333", Action: "ListClusters", Rate: 1}}}
	log := string(gen(t, half)) + strings.Replace(goodLine, "12:00:00", "11:50:00", 1) + "\n"
	if r, err = Run([]Input{input("late.jsonl", []byte(log))}, Options{}); err != nil {
		t.Fatal(err)
	}
	if b := bucketOf(t, r, "111122223333"); len(r.Inexact) != 0 || b.Calls != 1801 || b.Throttled != 0 {
		t.Errorf("inexact %v, %d calls, %d throttled; want exact, 1801, 0", r.Inexact, b.Calls, b.Throttled)
	}
}
