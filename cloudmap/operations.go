package cloudmap

import (
	"context"
	"strconv"
)

// opStatus is an operation's status and update time (Unix ms) now.
func (r *Registry) opStatus(op *operation) (string, int64) {
	if done := op.Created + r.delay.Milliseconds(); r.nowMillis() >= done {
		return "SUCCESS", done
	}
	return "SUBMITTED", op.Created
}

// operationFilters are ListOperations's filters.
var operationFilters = []filterRule{
	{"NAMESPACE_ID", []string{"EQ"}},
	{"SERVICE_ID", []string{"EQ"}},
	{"STATUS", []string{"EQ", "IN"}},
	{"TYPE", []string{"EQ", "IN"}},
	{"UPDATE_DATE", []string{"BETWEEN"}},
}

type operationSummaryJSON struct{ Id, Status string }

// listOperations lists the operations this registry remembers (the last
// Limits.Operations of the scope), oldest first.
func (r *Registry) listOperations(ctx context.Context, sc Scope, body []byte) (any, error) {
	in, max, err := decodeList(body, operationFilters)
	if err != nil {
		return nil, err
	}
	var from, to float64
	for _, f := range in.Filters {
		if f.Name != "UPDATE_DATE" {
			continue
		}
		var e1, e2 error
		from, e1 = strconv.ParseFloat(f.Values[0], 64)
		to, e2 = strconv.ParseFloat(f.Values[1], 64)
		if e1 != nil || e2 != nil {
			return nil, invalid("filter UPDATE_DATE: Values must be two dates in epoch seconds, start first")
		}
	}
	var out struct {
		NextToken  string `json:",omitempty"`
		Operations []operationSummaryJSON
	}
	err = r.view(ctx, sc, func(s *state) error {
		var all []operationSummaryJSON
		for _, id := range s.OpOrder {
			op := s.Ops[id]
			status, updated := r.opStatus(op)
			if matchAll(in.Filters, func(name string) string {
				switch name {
				case "NAMESPACE_ID":
					return op.Targets["NAMESPACE"]
				case "SERVICE_ID":
					return op.Targets["SERVICE"]
				case "STATUS":
					return status
				case "TYPE":
					return op.Type
				}
				if sec := float64(updated) / 1000; sec >= from && sec <= to {
					return "in" // UPDATE_DATE
				}
				return ""
			}) {
				all = append(all, operationSummaryJSON{Id: op.ID, Status: status})
			}
		}
		var err error
		out.Operations, out.NextToken, err = page(all, in.NextToken, max)
		return err
	})
	if out.Operations == nil {
		out.Operations = []operationSummaryJSON{}
	}
	return out, err
}
