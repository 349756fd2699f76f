package servicequotas_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sq "github.com/aws/aws-sdk-go-v2/service/servicequotas"
	"github.com/aws/aws-sdk-go-v2/service/servicequotas/types"

	"github.com/tollgate/tollgate/awsjson"
	"github.com/tollgate/tollgate/limiter/limitertest"
	"github.com/tollgate/tollgate/limiter/memory"
	"github.com/tollgate/tollgate/servicequotas"
)

// The SDK tags the ARN GetServiceQuota answers, lists and untags them;
// another account can neither read nor change them, and its own ARN of
// the same quota has none.
func TestSDKTagRoundTrip(t *testing.T) {
	clock := limitertest.NewClock()
	n := newNode(t, memory.New(memory.Options{Now: clock.Now}), servicequotas.Options{Now: clock.Now})
	ctx := context.Background()
	c := n.quotas("AKIDTAGGER")
	code := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
	q, err := c.GetServiceQuota(ctx, &sq.GetServiceQuotaInput{ServiceCode: aws.String("ecs"), QuotaCode: aws.String(code)})
	if err != nil {
		t.Fatal(err)
	}
	arn := q.Quota.QuotaArn
	if _, err := c.TagResource(ctx, &sq.TagResourceInput{ResourceARN: arn, Tags: []types.Tag{
		{Key: aws.String("team"), Value: aws.String("payments")}, {Key: aws.String("cost centre"), Value: aws.String("")}}}); err != nil {
		t.Fatal(err)
	}
	list := func(c *sq.Client, arn *string) string {
		t.Helper()
		out, err := c.ListTagsForResource(ctx, &sq.ListTagsForResourceInput{ResourceARN: arn})
		if err != nil {
			t.Fatalf("ListTagsForResource: %v", err)
		}
		var s []string
		for _, tg := range out.Tags {
			s = append(s, aws.ToString(tg.Key)+"="+aws.ToString(tg.Value))
		}
		return strings.Join(s, ",")
	}
	if got := list(c, arn); got != "cost centre=,team=payments" {
		t.Fatalf("tags: %q", got)
	}
	if _, err := c.UntagResource(ctx, &sq.UntagResourceInput{ResourceARN: arn, TagKeys: []string{"cost centre", "absent"}}); err != nil {
		t.Fatal(err)
	}
	if got := list(c, arn); got != "team=payments" {
		t.Fatalf("after untag: %q", got)
	}

	other := n.quotas("AKIDOTHER")
	var denied *types.AccessDeniedException
	if _, err := other.ListTagsForResource(ctx, &sq.ListTagsForResourceInput{ResourceARN: arn}); !errors.As(err, &denied) {
		t.Fatalf("another account lists the tags: %v", err)
	}
	if _, err := other.TagResource(ctx, &sq.TagResourceInput{ResourceARN: arn, Tags: []types.Tag{{Key: aws.String("team"), Value: aws.String("x")}}}); !errors.As(err, &denied) {
		t.Fatalf("another account tags: %v", err)
	}
	if _, err := other.UntagResource(ctx, &sq.UntagResourceInput{ResourceARN: arn, TagKeys: []string{"team"}}); !errors.As(err, &denied) {
		t.Fatalf("another account untags: %v", err)
	}
	// Another account's ARN of a quota that does not exist is denied
	// too: the answer says nothing of what exists.
	if _, err := other.ListTagsForResource(ctx, &sq.ListTagsForResourceInput{ResourceARN: aws.String(strings.Replace(*arn, code, "L-00000000", 1))}); !errors.As(err, &denied) {
		t.Fatalf("another account's ARN of no quota: %v", err)
	}
	if got := list(c, arn); got != "team=payments" {
		t.Fatalf("after the other account: %q", got)
	}
	oq, err := other.GetServiceQuota(ctx, &sq.GetServiceQuotaInput{ServiceCode: aws.String("ecs"), QuotaCode: aws.String(code)})
	if err != nil {
		t.Fatal(err)
	}
	if got := list(other, oq.Quota.QuotaArn); got != "" {
		t.Fatalf("the other account's own ARN: %q", got)
	}

	var noSuch *types.NoSuchResourceException
	for _, bad := range []string{strings.Replace(*arn, code, "L-00000000", 1), strings.Replace(*arn, "us-east-1", "eu-west-1", 1),
		strings.Replace(*arn, ":servicequotas:", ":ecs:", 1), strings.Replace(*arn, "ecs/", "nope/", 1)} {
		if _, err := c.ListTagsForResource(ctx, &sq.ListTagsForResourceInput{ResourceARN: aws.String(bad)}); !errors.As(err, &noSuch) {
			t.Fatalf("%s: %v, want NoSuchResourceException", bad, err)
		}
	}
	var illegal *types.IllegalArgumentException
	if _, err := c.ListTagsForResource(ctx, &sq.ListTagsForResourceInput{ResourceARN: aws.String("ecs/" + code)}); !errors.As(err, &illegal) {
		t.Fatalf("not an ARN: %v", err)
	}
}

// tagged is a ListTagsForResource answer.
type tagged struct {
	Tags []struct{ Key, Value string }
}

// tagArn is the ARN of account's quota code of ECS in region.
func tagArn(region, account, code string) string {
	return "arn:aws:servicequotas:" + region + ":" + awsjson.AccountID(account) + ":ecs/" + code
}

func tagList(prefix string, n int) []map[string]string {
	out := make([]map[string]string, n)
	for i := range out {
		out[i] = map[string]string{"Key": fmt.Sprintf("%s%d", prefix, i), "Value": "v"}
	}
	return out
}

// The model's limits on keys, values and counts, in memory and on Redis.
func TestTagLimits(t *testing.T) {
	both(t, func(t *testing.T, redis bool) {
		a := newAPI(t, redis, servicequotas.Policy{})
		arn := tagArn("us-east-1", tenantAccount, servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Rate))
		tagOne := func(k, v, want string) {
			t.Helper()
			if _, code := a.call(tenantKey, "TagResource", map[string]any{"ResourceARN": arn, "Tags": []map[string]string{{"Key": k, "Value": v}}}, nil); code != want {
				t.Fatalf("tag %s=%s: %q, want %q", awsjson.Clip(k), awsjson.Clip(v), code, want)
			}
		}
		const ill = "IllegalArgumentException"
		tagOne(strings.Repeat("k", 128), strings.Repeat("é", 256), "")
		tagOne(strings.Repeat("k", 129), "", ill)
		tagOne("k", strings.Repeat("v", 257), ill)
		tagOne("", "v", ill)
		tagOne("k!", "v", ill)
		tagOne("k", "v\n", ill)
		tagOne("aws:owner", "v", ill)
		tagOne("Ünïcode key @ 1.2/3=4+5-6_7:8", "", "")
		if _, code := a.call(tenantKey, "TagResource", map[string]any{"ResourceARN": arn, "Tags": []any{}}, nil); code != ill {
			t.Fatalf("no tags: %q", code)
		}
		if _, code := a.call(tenantKey, "TagResource", map[string]any{"ResourceARN": arn,
			"Tags": []map[string]string{{"Key": "d", "Value": "1"}, {"Key": "d", "Value": "2"}}}, nil); code != ill {
			t.Fatalf("a key twice: %q", code)
		}
		if _, code := a.call(tenantKey, "TagResource", map[string]any{"ResourceARN": arn, "Tags": []map[string]any{{"Key": "k"}}}, nil); code != ill {
			t.Fatalf("no value: %q", code)
		}
		// Two held; 48 more fill the quota's 50, and one more is refused
		// whole, while replacing a value is not adding a tag.
		if _, code := a.call(tenantKey, "TagResource", map[string]any{"ResourceARN": arn, "Tags": tagList("t", 48)}, nil); code != "" {
			t.Fatalf("48 more: %q", code)
		}
		if _, code := a.call(tenantKey, "TagResource", map[string]any{"ResourceARN": arn, "Tags": append(tagList("t", 3), map[string]string{"Key": "new", "Value": ""})}, nil); code != "TooManyTagsException" {
			t.Fatalf("the 51st tag: %q", code)
		}
		tagOne("t0", "replaced", "")
		var got tagged
		if _, code := a.call(tenantKey, "ListTagsForResource", map[string]string{"ResourceARN": arn}, &got); code != "" || len(got.Tags) != servicequotas.MaxTagsPerQuota {
			t.Fatalf("list: %q, %d tags", code, len(got.Tags))
		}
		for _, tg := range got.Tags {
			if tg.Key == "new" || tg.Key == "t0" && tg.Value != "replaced" {
				t.Fatalf("tag %+v", tg)
			}
		}
		if _, code := a.call(tenantKey, "UntagResource", map[string]any{"ResourceARN": arn, "TagKeys": []string{"t1"}}, nil); code != "" {
			t.Fatalf("untag: %q", code)
		}
		tagOne("new", "", "")
		if _, code := a.call(tenantKey, "UntagResource", map[string]any{"ResourceARN": arn, "TagKeys": []string{}}, nil); code != ill {
			t.Fatalf("untag nothing: %q", code)
		}
	})
}

// Each account tags at most MaxTaggedPerAccount quota ARNs, over every
// Region; untagging one frees its place, and other accounts are not
// counted.
func TestTaggedQuotasPerAccountAreBounded(t *testing.T) {
	both(t, func(t *testing.T, redis bool) {
		a := newAPI(t, redis, servicequotas.Policy{})
		qs, _ := a.svc.Catalog().Quotas("ecs")
		// Private regions test-0, test-1, …, enough to spread the tags
		// one per quota and region (a config's regions list).
		var names []string
		for i := 0; i <= servicequotas.MaxTaggedPerAccount/len(qs); i++ {
			names = append(names, fmt.Sprintf("test-%d", i))
		}
		regions, err := awsjson.NewRegions(names)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.svc.SetConfig(a.svc.Catalog().Config().WithRegions(regions), servicequotas.Policy{}); err != nil {
			t.Fatal(err)
		}
		tag := func(key, account string, i int, want string) {
			t.Helper()
			region := fmt.Sprintf("test-%d", i/len(qs))
			code := qs[i%len(qs)].Code
			if _, got := a.callIn(region, key, "TagResource", map[string]any{"ResourceARN": tagArn(region, account, code),
				"Tags": []map[string]string{{"Key": "n", "Value": fmt.Sprint(i)}}}, nil); got != want {
				t.Fatalf("%s tags quota %d: %q, want %q", account, i, got, want)
			}
		}
		for i := range servicequotas.MaxTaggedPerAccount {
			tag(tenantKey, tenantAccount, i, "")
		}
		tag(tenantKey, tenantAccount, servicequotas.MaxTaggedPerAccount, "TooManyTagsException")
		tag(tenantKey, tenantAccount, 7, "") // a tagged one takes more tags
		tag("AKIDELSE", "AKIDELSE", 0, "")
		region := fmt.Sprintf("test-%d", 3/len(qs))
		if _, got := a.callIn(region, tenantKey, "UntagResource", map[string]any{"ResourceARN": tagArn(region, tenantAccount, qs[3%len(qs)].Code),
			"TagKeys": []string{"n"}}, nil); got != "" {
			t.Fatalf("untag: %q", got)
		}
		tag(tenantKey, tenantAccount, servicequotas.MaxTaggedPerAccount, "")
	})
}

// Access keys the config does not map share MaxTaggedUnmapped tagged
// quota ARNs: beyond, any made-up key is refused, and the mapped tenant
// is not.
func TestUnmappedKeysShareATagBudget(t *testing.T) {
	both(t, func(t *testing.T, redis bool) {
		a := newAPI(t, redis, servicequotas.Policy{})
		code := servicequotas.QuotaCode("ecs", "cluster-read", servicequotas.Burst)
		tag := func(key, account, want string) {
			t.Helper()
			if _, got := a.call(key, "TagResource", map[string]any{"ResourceARN": tagArn("us-east-1", account, code),
				"Tags": []map[string]string{{"Key": "k", "Value": "v"}}}, nil); got != want {
				t.Fatalf("%s: %q, want %q", key, got, want)
			}
		}
		for i := range servicequotas.MaxTaggedUnmapped {
			k := fmt.Sprintf("AKIDFAKE%05d", i)
			tag(k, k, "")
		}
		tag("AKIDFAKEMORE", "AKIDFAKEMORE", "TooManyTagsException")
		tag(tenantKey, tenantAccount, "")
		if _, got := a.call("AKIDFAKE00000", "UntagResource", map[string]any{"ResourceARN": tagArn("us-east-1", "AKIDFAKE00000", code),
			"TagKeys": []string{"k"}}, nil); got != "" {
			t.Fatalf("untag: %q", got)
		}
		tag("AKIDFAKEMORE", "AKIDFAKEMORE", "")
	})
}

// Automatic Management: no account has opted in (tollgate has no AWS
// User Notifications), so Get, Update and Stop answer as AWS does then,
// and Start says it cannot, after checking its input as the model does.
func TestAutoManagementNotOptedIn(t *testing.T) {
	clock := limitertest.NewClock()
	n := newNode(t, memory.New(memory.Options{Now: clock.Now}), servicequotas.Options{Now: clock.Now})
	ctx := context.Background()
	c := n.quotas("AKIDAUTO")
	var noSuch *types.NoSuchResourceException
	if _, err := c.GetAutoManagementConfiguration(ctx, &sq.GetAutoManagementConfigurationInput{}); !errors.As(err, &noSuch) {
		t.Fatalf("Get: %v", err)
	}
	if _, err := c.StopAutoManagement(ctx, &sq.StopAutoManagementInput{}); !errors.As(err, &noSuch) {
		t.Fatalf("Stop: %v", err)
	}
	if _, err := c.UpdateAutoManagement(ctx, &sq.UpdateAutoManagementInput{OptInType: types.OptInTypeNotifyOnly}); !errors.As(err, &noSuch) {
		t.Fatalf("Update: %v", err)
	}
	var illegal *types.IllegalArgumentException
	if _, err := c.UpdateAutoManagement(ctx, &sq.UpdateAutoManagementInput{OptInType: "Sometimes"}); !errors.As(err, &illegal) {
		t.Fatalf("Update with a bad type: %v", err)
	}
	if _, err := c.StartAutoManagement(ctx, &sq.StartAutoManagementInput{OptInLevel: types.OptInLevelAccount, OptInType: types.OptInTypeNotifyOnly,
		ExclusionList: map[string][]string{"ecs": {"L-1!"}}}); !errors.As(err, &illegal) {
		t.Fatalf("Start with a bad exclusion: %v", err)
	}
	var denied *types.AccessDeniedException
	if _, err := c.StartAutoManagement(ctx, &sq.StartAutoManagementInput{OptInLevel: types.OptInLevelAccount, OptInType: types.OptInTypeNotifyOnly}); !errors.As(err, &denied) ||
		!strings.Contains(err.Error(), "User Notifications") {
		t.Fatalf("Start: %v", err)
	}
	if _, err := c.GetAutoManagementConfiguration(ctx, &sq.GetAutoManagementConfigurationInput{}); !errors.As(err, &noSuch) {
		t.Fatalf("Get after Start: %v", err)
	}
}
