package quota

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/tollgate/tollgate/bucket"
)

// AWS Fargate throttles RunTask on its own, beside ECS's
// cluster-resource-modify bucket ("AWS Fargate throttling quotas", ECS
// developer guide): per account and region, RunTask calls that launch on
// Fargate at 20 per second, burst and sustained; and the tasks launched,
// a bucket of 100 refilled 20 per second for On-Demand and another for
// Spot, from which a RunTask takes one token per task.
const (
	FargateRunTask       = "fargate-run-task"        // RunTask calls on Fargate
	FargateOnDemandTasks = "fargate-on-demand-tasks" // tasks launched on FARGATE
	FargateSpotTasks     = "fargate-spot-tasks"      // tasks launched on FARGATE_SPOT
)

// fargateCategories are the Fargate buckets of the ecs preset.
func fargateCategories() []*Category {
	return []*Category{
		{Name: FargateRunTask, Limit: bucket.MustLimit(20, 20),
			DrawnBy: "RunTask on Fargate, by launchType FARGATE or a capacityProviderStrategy naming FARGATE or FARGATE_SPOT: one token per call"},
		{Name: FargateOnDemandTasks, Limit: bucket.MustLimit(100, 20),
			DrawnBy: "RunTask on Fargate On-Demand: one token per task launched on FARGATE, count 1 to 10 a call"},
		{Name: FargateSpotTasks, Limit: bucket.MustLimit(100, 20),
			DrawnBy: "RunTask on Fargate Spot: one token per task launched on FARGATE_SPOT, count 1 to 10 a call"},
	}
}

// The bounds of RunTask's parameters (ECS API reference).
const (
	maxRunTaskCount = 10     // tasks per RunTask
	maxStrategy     = 20     // capacity providers in a strategy
	maxWeight       = 1000   // a provider's weight
	maxBase         = 100000 // a provider's base
	maxProviderName = 255    // a capacity provider's name
)

// runTaskBody is what tollgate reads of a RunTask request; the rest of
// the body is skipped.
type runTaskBody struct {
	Count                    *int64         `json:"count"`
	LaunchType               *string        `json:"launchType"`
	CapacityProviderStrategy []strategyItem `json:"capacityProviderStrategy"`
}

type strategyItem struct {
	CapacityProvider *string `json:"capacityProvider"`
	Weight           *int64  `json:"weight"`
	Base             *int64  `json:"base"`
}

func invalidParameter(format string, args ...any) error {
	return &RequestError{Code: "InvalidParameterException", Message: fmt.Sprintf(format, args...)}
}

// chargeRunTask adds Fargate's buckets to a RunTask that launches on
// Fargate. One not on Fargate (EC2, EXTERNAL, MANAGED_INSTANCES, a
// strategy of other providers, or neither a launch type nor a strategy,
// which leaves the choice to the cluster's default strategy, unknown
// here) takes from ECS's bucket only.
func chargeRunTask(s *Service, body []byte, dst []Charge) ([]Charge, error) {
	var req runTaskBody
	if len(bytes.TrimSpace(body)) != 0 {
		if err := json.Unmarshal(body, &req); err != nil {
			return dst, serializationError(err)
		}
	}
	count := int64(1)
	if req.Count != nil {
		count = *req.Count
		if count < 1 || count > maxRunTaskCount {
			return dst, invalidParameter("count must be between 1 and %d tasks per RunTask, got %d", maxRunTaskCount, count)
		}
	}
	onDemand, spot, err := fargateTasks(req, count)
	if err != nil || onDemand+spot == 0 {
		return dst, err
	}
	dst = append(dst, Charge{Category: s.byName[FargateRunTask], Tokens: 1})
	if onDemand > 0 {
		dst = append(dst, Charge{Category: s.byName[FargateOnDemandTasks], Tokens: onDemand})
	}
	if spot > 0 {
		dst = append(dst, Charge{Category: s.byName[FargateSpotTasks], Tokens: spot})
	}
	return dst, nil
}

// fargateTasks returns how many of a RunTask's count tasks launch on
// Fargate On-Demand and on Fargate Spot.
//
// A strategy places its base tasks on the provider that has a base, then
// splits the rest by weight. AWS does not say how it rounds the split, so
// each Fargate provider is charged its share rounded up: a strategy mixing
// FARGATE and FARGATE_SPOT may take one token more from each tasks bucket
// than AWS would (1 task at weights 1:1 takes 1 from each), never fewer.
func fargateTasks(req runTaskBody, count int64) (onDemand, spot int64, err error) {
	strategy := req.CapacityProviderStrategy
	if req.LaunchType != nil {
		if len(strategy) != 0 {
			return 0, 0, invalidParameter("Specifying both a launchType and capacityProviderStrategy is not supported. Remove one and try again.")
		}
		switch lt := *req.LaunchType; lt {
		case "FARGATE":
			return count, 0, nil
		case "EC2", "EXTERNAL", "MANAGED_INSTANCES":
			return 0, 0, nil
		default:
			return 0, 0, invalidParameter("launchType must be one of EC2, FARGATE, EXTERNAL, MANAGED_INSTANCES, got %s", strconv.Quote(clipName(lt)))
		}
	}
	if len(strategy) > maxStrategy {
		return 0, 0, invalidParameter("capacityProviderStrategy has %d capacity providers, at most %d are allowed", len(strategy), maxStrategy)
	}
	var (
		weights        = make([]int64, len(strategy))
		total, based   int64
		baseOf         = -1
		names          = make([]string, len(strategy))
		fargate, fspot = -1, -1
	)
	for i, it := range strategy {
		field := fmt.Sprintf("capacityProviderStrategy[%d]", i)
		if it.CapacityProvider == nil || *it.CapacityProvider == "" {
			return 0, 0, invalidParameter("%s.capacityProvider is required", field)
		}
		name := *it.CapacityProvider
		if len(name) > maxProviderName {
			return 0, 0, invalidParameter("%s.capacityProvider is longer than %d characters", field, maxProviderName)
		}
		if slices.Contains(names[:i], name) {
			return 0, 0, invalidParameter("%s.capacityProvider %s is listed twice", field, strconv.Quote(name))
		}
		names[i] = name
		if it.Weight != nil {
			if w := *it.Weight; w < 0 || w > maxWeight {
				return 0, 0, invalidParameter("%s.weight must be between 0 and %d, got %d", field, maxWeight, w)
			}
			weights[i] = *it.Weight
			total += weights[i]
		}
		if it.Base != nil {
			b := *it.Base
			if b < 0 || b > maxBase {
				return 0, 0, invalidParameter("%s.base must be between 0 and %d, got %d", field, maxBase, b)
			}
			if b > 0 {
				if baseOf >= 0 {
					return 0, 0, invalidParameter("only one capacity provider in a capacityProviderStrategy can have a base; %s and %s both do", strconv.Quote(names[baseOf]), strconv.Quote(name))
				}
				baseOf, based = i, min(b, count)
			}
		}
		switch name {
		case "FARGATE":
			fargate = i
		case "FARGATE_SPOT":
			fspot = i
		}
	}
	rest := count - based
	if rest > 0 && len(strategy) != 0 && total == 0 {
		return 0, 0, invalidParameter("capacityProviderStrategy: at least one capacity provider must have a weight greater than 0")
	}
	share := func(i int) int64 {
		if i < 0 {
			return 0
		}
		n := int64(0)
		if i == baseOf {
			n = based
		}
		if rest > 0 && weights[i] > 0 {
			n += (rest*weights[i] + total - 1) / total
		}
		return min(n, count)
	}
	return share(fargate), share(fspot), nil
}

// serializationError describes a RunTask body of the wrong shape by the
// field and the JSON it holds, as a SerializationException.
func serializationError(err error) error {
	msg := "RunTask body: " + err.Error()
	var se *json.SemanticError
	if errors.As(err, &se) && se.GoType != nil {
		field := ""
		for tok := range se.JSONPointer.Tokens() {
			if _, err := strconv.Atoi(tok); err == nil {
				field += "[" + tok + "]"
			} else if field == "" {
				field = tok
			} else {
				field += "." + tok
			}
		}
		if field == "" {
			field = "RunTask body"
		}
		want := "a JSON " + se.GoType.String()
		switch t := se.GoType; {
		case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Int64, t.Kind() == reflect.Int64:
			want = "a whole number"
		case t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.String, t.Kind() == reflect.String:
			want = "a string"
		case t.Kind() == reflect.Slice:
			want = "a list"
		case t.Kind() == reflect.Struct:
			want = "an object"
		}
		got := map[byte]string{'n': "null", 't': "true", 'f': "false", '"': "a string", '0': "a number", '{': "an object", '[': "a list"}[byte(se.JSONKind)]
		msg = fmt.Sprintf("%s: want %s, got %s", field, want, got)
		if want == "a whole number" && got == "a number" {
			msg = field + ": want a whole number that fits in 64 bits, got a fraction or a larger number"
		}
	}
	return &RequestError{Code: "SerializationException", Message: msg}
}

// clipName shortens a client's string for an error message.
func clipName(s string) string {
	if len(s) > 64 {
		return strings.ToValidUTF8(s[:64], "") + "…"
	}
	return s
}
