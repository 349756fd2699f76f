package gateway

import (
	"slices"
	"testing"
)

// FuzzBatchDecoder checks the streaming batch decoder against the plain
// one (json v2 into BatchRequest with decodeStrict's rules): they accept
// and reject the same bodies and find the same takes.
func FuzzBatchDecoder(f *testing.F) {
	for _, s := range []string{
		`{"service":"ecs","account":"1","region":"us-east-1","requests":[{"action":"ListClusters"},{"account":"2","action":"DescribeClusters","tokens":5}]}`,
		`{"requests":[{"service":"cloudmap","account":"a","region":"r","category":"discover-instances","tokens":0}]}`,
		`{"requests":[null,{"tokens":null,"action":null}]}`,
		`{"requests":null}`,
		`{"requests":[]}`,
		`{}`,
		`{"requests":[{"tokens":1.5}]}`,
		`{"requests":[{"tokens":-3}]}`,
		`{"requests":[{"tokens":"3"}]}`,
		`{"requests":[{"action":"a","action":"b"}]}`,
		`{"requests":[{"bogus":1}]}`,
		`{"action":"x","requests":[]}`,
		`{"requests":[{"account":"\u00e9\n"}]}`,
		`{"requests":{}}`,
		`[]`,
		`{"requests":[]} {}`,
		`{"requests":[{"region":`,
		``,
		`{"service":"ecs","region":"us-east-1","requests":[{"account":"000000000001","action":"ListClusters"},{"account":"2","tokens":0},{"account":"3","tokens":-0}]}`,
		` { "requests" : [ { "tokens" : 12 } , { } ] } `,
		`{"requests":[{"tokens":012}]}`,
		`{"requests":[{"tokens":1e2}]}`,
		`{"requests":[{"tokens":1234567890123456789}]}`,
		`{"requests":[],"requests":[]}`,
		`{"service":"a","service":"b","requests":[]}`,
		`{"requests":[{"account":"a\u0041"}]}`,
		`{"requests":[{"account":""}]}`,
		`{"requests":[{}]}x`,
		`{"requests":[{},]}`,
		`{"requests":[{"account":"a",}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want BatchRequest
		wantErr := decodeStrict(data, &want)

		bd := batchDecoders.Get().(*batchDecoder)
		defer putBatchDecoder(bd)
		gotErr := bd.decode(data, 0)

		full := batchDecoders.Get().(*batchDecoder)
		defer putBatchDecoder(full)
		full.maxItems = 0
		fullErr := full.decodeFull(data)
		if fast := batchDecoders.Get().(*batchDecoder); fast.scan(data, 0) {
			if fullErr != nil || string(fast.arena) != string(full.arena) || fast.top != full.top || fast.sawReq != full.sawReq || !slices.Equal(fast.items, full.items) {
				t.Fatalf("%q: the fast path found %+v %+v in %q, the full decoder %+v %+v in %q (error %v)", data, fast.top, fast.items, fast.arena, full.top, full.items, full.arena, fullErr)
			}
			putBatchDecoder(fast)
		}
		if (wantErr == nil) != (fullErr == nil) {
			t.Fatalf("%q: plain decoder error %v, full streaming decoder error %v", data, wantErr, fullErr)
		}
		if (wantErr == nil) != (gotErr == nil) {
			t.Fatalf("%q: plain decoder error %v, streaming decoder error %v", data, wantErr, gotErr)
		}
		if wantErr != nil {
			return
		}
		if (want.Requests != nil) != bd.sawReq {
			t.Fatalf("%q: plain requests=%v, streaming saw requests=%v", data, want.Requests, bd.sawReq)
		}
		if len(want.Requests) != len(bd.items) {
			t.Fatalf("%q: %d takes, streaming %d", data, len(want.Requests), len(bd.items))
		}
		all := string(bd.arena)
		for i := range want.Requests {
			w := want.Requests[i]
			if w.Service == "" {
				w.Service = want.Service
			}
			if w.Account == "" {
				w.Account = want.Account
			}
			if w.Region == "" {
				w.Region = want.Region
			}
			g := bd.request(all, &bd.items[i])
			if w.Service != g.Service || w.Account != g.Account || w.Region != g.Region || w.Action != g.Action || w.Category != g.Category {
				t.Fatalf("%q: take %d: plain %+v, streaming %+v", data, i, w, g)
			}
			if (w.Tokens == nil) != (g.Tokens == nil) || (w.Tokens != nil && *w.Tokens != *g.Tokens) {
				t.Fatalf("%q: take %d tokens: plain %v, streaming %v", data, i, w.Tokens, g.Tokens)
			}
		}
	})
}
