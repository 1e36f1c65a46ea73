package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, argv []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	gateway := fs.String("gateway", "http://127.0.0.1:8080", "gateway base URL (MCP at /mcp)")
	apiKey := fs.String("api-key", "ob_demo_acme_key", "the workspace's API key (Bearer)")
	tool := fs.String("tool", "payments.create_charge", "write tool for pattern 1 (own key, lost reply)")
	args := fs.String("args", `{"amount":1200,"currency":"usd"}`, "its arguments, one JSON object")
	mintedTool := fs.String("minted-tool", "payments.create_charge", "write tool for pattern 2 (minted key)")
	mintedArgs := fs.String("minted-args", `{"amount":700,"currency":"usd","simulate":"503_once"}`, "its arguments, one JSON object")
	if err := fs.Parse(argv); err != nil {
		return err
	}
	var a, ma map[string]any
	if json.Unmarshal([]byte(*args), &a) != nil || a == nil ||
		json.Unmarshal([]byte(*mintedArgs), &ma) != nil || ma == nil {
		return ErrInvalidArgs
	}

	c, err := Dial(ctx, *gateway, *apiKey, nil)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := RetryOwnKey(ctx, c, stdout, *tool, a); err != nil {
		return err
	}
	_, _, err = RetryMintedKey(ctx, c, stdout, *mintedTool, ma)
	return err
}
