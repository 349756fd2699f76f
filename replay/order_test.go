package replay

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// orderLines is a trail of one record a line: two tenants of the
// acceptance shape for five minutes, and Fargate RunTasks at the same
// instants, whose calls take from several buckets and are retried.
func orderLines(t *testing.T) []string {
	s := acceptance
	s.Duration, s.Lines = 5*time.Minute, true
	lines := strings.Split(strings.TrimSpace(string(gen(t, s))), "\n")
	for sec := range 300 {
		at := t0.Add(time.Duration(sec) * time.Second).Format(time.RFC3339)
		for i := range 4 + sec%7 {
			lines = append(lines, fmt.Sprintf(`{"eventTime":%q,"eventSource":"ecs.amazonaws.com","eventName":"RunTask","awsRegion":"us-east-1","userIdentity":{"accountId":"111122223333"},"requestParameters":{"launchType":"FARGATE","count":%d}}`, at, 1+(sec+i)%10))
		}
	}
	slices.SortStableFunc(lines, func(a, b string) int { return strings.Compare(lineTime(a), lineTime(b)) })
	return lines
}

func lineTime(l string) string {
	i := strings.Index(l, `"eventTime":"`)
	return l[i+13 : i+33]
}

// reportOf replays inputs and returns the report's JSON, its input count
// aside.
func reportOf(t *testing.T, ins []Input) string {
	t.Helper()
	r, err := Run(ins, Options{Seed: 7, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Inexact) != 0 || len(r.Errors) != 0 || r.Skipped != 0 {
		t.Fatalf("inexact %v, errors %v, %d skipped", r.Inexact, r.Errors, r.Skipped)
	}
	r.Inputs = 0
	var b bytes.Buffer
	if err := r.WriteJSON(&b); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func joinLines(ls []string) []byte { return []byte(strings.Join(ls, "\n") + "\n") }

func recordsFile(ls []string) []byte {
	return []byte(`{"Records":[` + strings.Join(ls, ",") + `]}`)
}

// TestOrderNeverChangesTheReport: the same records oldest first, newest
// first (a line a record and CloudTrail's Records file), and shuffled
// across files given in any order, sorted in memory or spilled to disk
// in runs: the same report, byte for byte, retries and the all-or-none
// RunTasks included.
func TestOrderNeverChangesTheReport(t *testing.T) {
	lines := orderLines(t)
	want := reportOf(t, []Input{input("sorted.jsonl", joinLines(lines))})
	if !strings.Contains(want, `"fargate-on-demand-tasks"`) {
		t.Fatalf("the sorted log's report lacks the Fargate buckets:\n%s", want)
	}
	newest := slices.Clone(lines)
	slices.Reverse(newest)
	rnd := rand.New(rand.NewPCG(1, 2))
	shuffled := slices.Clone(lines)
	rnd.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
	var parts [5][]string
	for i, l := range shuffled {
		parts[i%5] = append(parts[i%5], l)
	}
	cases := map[string][]Input{
		"newest first":          {input("newest.jsonl", joinLines(newest))},
		"newest first, Records": {input("newest.json", recordsFile(newest))},
		"shuffled across files": {
			input("z.jsonl", joinLines(parts[0])), input("a.json.gz", gz(t, recordsFile(parts[1]))),
			input("m.jsonl", joinLines(parts[2])), input("b.json", recordsFile(parts[3])), input("c.jsonl", joinLines(parts[4])),
		},
	}
	defer func() { sortMemory = maxInMemory }()
	for _, spill := range []bool{false, true} {
		if spill {
			sortMemory = 1000 // runs of 1,000 calls, merged
		}
		for name, ins := range cases {
			if got := reportOf(t, ins); got != want {
				t.Errorf("%s (spilled %v): the report differs from the sorted log's:\n%s\nwant:\n%s", name, spill, got, want)
			}
		}
		if spill {
			if got := reportOf(t, []Input{input("sorted.jsonl", joinLines(lines))}); got != want {
				t.Errorf("sorted, spilled: the report differs from the sorted log's in memory")
			}
		}
	}
}
