package retry_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/obol-gateway/obol/retry"
)

func ExampleExecutor_Do() {
	vendor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, `{"id":"ch_1"}`)
	}))
	defer vendor.Close()

	var exec retry.Executor // one per gateway: it keeps keep-alive connections
	defer exec.CloseIdleConnections()

	req, _ := http.NewRequest("POST", vendor.URL+"/v1/charges", strings.NewReader(`{"amount":1000}`))
	req.Header.Set("Idempotency-Key", "idt_5c1f0a9e3b7d4c2a8e6f1b0d9c8a7e6f")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()

	res := exec.Do(ctx, req)
	switch res.Phase {
	case retry.Responded:
		fmt.Println(res.Phase, res.Status, string(res.Body))
	case retry.BeforeSend:
		fmt.Println("nothing was sent:", res.Err)
	case retry.PostSend:
		fmt.Println("the vendor may have seen it:", res.Err)
	}
	// Output: responded 201 {"id":"ch_1"}
}
