package retry

import (
	"errors"
	"sync"
	"testing"
)

func TestDefaultTokenBudgetShape(t *testing.T) {
	b := DefaultTokenBudget()
	if b.Tokens() != 500 {
		t.Fatalf("tokens = %v, want 500", b.Tokens())
	}
	c, err := b.Withdraw(Throttle)
	if err != nil || c != 5 {
		t.Fatalf("throttle cost = %v, %v", c, err)
	}
	c, err = b.Withdraw(Retryable)
	if err != nil || c != 14 || b.Tokens() != 481 {
		t.Fatalf("retry cost = %v, %v, tokens %v", c, err, b.Tokens())
	}
	b.Succeeded(false, 14)
	if b.Tokens() != 495 {
		t.Fatalf("after refund of a successful retry: %v, want 495", b.Tokens())
	}
	for range 10 {
		b.Succeeded(true, 0)
	}
	if b.Tokens() != 500 {
		t.Fatalf("refunds must not exceed capacity: %v", b.Tokens())
	}
	// 35 retries at 14 drain 490 tokens; the 36th does not fit in 10.
	for i := range 35 {
		if _, err := b.Withdraw(Retryable); err != nil {
			t.Fatalf("withdraw %d: %v", i, err)
		}
	}
	if _, err := b.Withdraw(Retryable); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("err = %v, want ErrBudgetExhausted", err)
	}
	if b.Tokens() != 10 {
		t.Fatalf("a refused withdrawal took tokens: %v", b.Tokens())
	}
	if _, err := b.Withdraw(Throttle); err != nil {
		t.Fatalf("a 5-token throttle retry should still fit: %v", err)
	}
}

func TestRatioBudget(t *testing.T) {
	b := NewRatioBudget(DefaultRetryRatio, 1)
	b.Begin()
	if _, err := b.Withdraw(Retryable); err != nil {
		t.Fatalf("burst retry refused: %v", err)
	}
	if _, err := b.Withdraw(Throttle); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("err = %v, want ErrBudgetExhausted", err)
	}
	// 1000 calls, each wanting a retry: at most 10 % (+ the burst) get one.
	retries := 0
	for range 1000 {
		b.Begin()
		if _, err := b.Withdraw(Retryable); err == nil {
			retries++
		}
		b.Succeeded(false, 1)
	}
	if retries > 101 || retries < 99 {
		t.Fatalf("retries = %d for 1000 calls, want about 100", retries)
	}
}

func TestBudgetNegativeArguments(t *testing.T) {
	b := NewTokenBudget(-1, -2, -3, -4)
	if b.Tokens() != 0 {
		t.Fatalf("tokens = %v", b.Tokens())
	}
	if c, err := b.Withdraw(Retryable); err != nil || c != 0 {
		t.Fatalf("zero-cost withdraw = %v, %v", c, err)
	}
}

func TestBudgetConcurrentWithdrawalsNeverOverdraw(t *testing.T) {
	b := NewTokenBudget(140, 14, 5, 1)
	var wg sync.WaitGroup
	var mu sync.Mutex
	granted := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 50 {
				if _, err := b.Withdraw(Retryable); err == nil {
					mu.Lock()
					granted++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if granted != 10 || b.Tokens() != 0 {
		t.Fatalf("granted %d retries, %v tokens left; want 10 and 0", granted, b.Tokens())
	}
}

// A burst below 1 would never pay for a retry (each costs 1 token); it is
// raised to 1.
func TestRatioBudgetBurstBelowOne(t *testing.T) {
	for _, burst := range []float64{0, 0.5, -3} {
		b := NewRatioBudget(DefaultRetryRatio, burst)
		b.Begin()
		if _, err := b.Withdraw(Retryable); err != nil {
			t.Fatalf("burst %v: first retry refused: %v", burst, err)
		}
	}
}

func TestZeroBudgetIsUnlimited(t *testing.T) {
	var b Budget
	for range 1000 {
		b.Begin()
		if _, err := b.Withdraw(Retryable); err != nil {
			t.Fatalf("zero Budget refused a retry: %v", err)
		}
	}
}
