package egress

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"time"
)

// clientEnv, when set, makes the test binary a client of the proxy, run
// as a child process inside a scope: "socks5" or "connect", with the
// arguments NETWORK ADDRESS HOST PORT PAYLOAD, prints the proxy's answer
// and the echo of PAYLOAD; "hold" with NETWORK ADDRESS COUNT opens COUNT
// connections, prints "ready" and keeps them until stdin closes.
const clientEnv = "MARSHAL_EGRESS_TEST_CLIENT"

func runClient(mode string, args []string) int {
	if err := client(mode, args); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	return 0
}

func client(mode string, args []string) error {
	if mode == "tunnels" {
		return holdTunnels(args)
	}
	if mode == "connect-bench" {
		return connectBench(args)
	}
	if mode == "resolve" {
		return resolveName(args)
	}
	if mode == "hold" {
		n, _ := strconv.Atoi(args[2])
		var conns []net.Conn
		for range n {
			c, err := net.Dial(args[0], args[1])
			if err != nil {
				return err
			}
			conns = append(conns, c)
		}
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		for _, c := range conns {
			c.Close()
		}
		return nil
	}
	network, addr, host, port, payload := args[0], args[1], args[2], args[3], args[4]
	c, err := net.Dial(network, addr)
	if err != nil {
		return err
	}
	defer c.Close()
	r := bufio.NewReader(c)
	switch mode {
	case "socks5":
		p, _ := strconv.Atoi(port)
		c.Write([]byte{5, 1, 0})
		var greet [2]byte
		if _, err := io.ReadFull(r, greet[:]); err != nil {
			return err
		}
		req := []byte{5, 1, 0, 3, byte(len(host))}
		req = append(req, host...)
		req = binary.BigEndian.AppendUint16(req, uint16(p))
		c.Write(req)
		var reply [10]byte
		if _, err := io.ReadFull(r, reply[:]); err != nil {
			return err
		}
		fmt.Printf("reply %d\n", reply[1])
		if reply[1] != 0 {
			return nil
		}
	case "connect", "connect-idle":
		fmt.Fprintf(c, "CONNECT %s:%s HTTP/1.1\r\nHost: %s:%s\r\n\r\n", host, port, host, port)
		status, err := r.ReadString('\n')
		if err != nil {
			return err
		}
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				return err
			}
			if line == "\r\n" {
				break
			}
		}
		code := strings.Fields(status)[1]
		fmt.Printf("status %s\n", code)
		if code != "200" {
			return nil
		}
	default:
		return fmt.Errorf("unknown client mode %q", mode)
	}
	c.Write([]byte(payload))
	echo := make([]byte, len(payload))
	if _, err := io.ReadFull(r, echo); err != nil {
		return err
	}
	fmt.Printf("echo %s\n", echo)
	if mode == "connect-idle" {
		io.Copy(io.Discard, r)
		fmt.Println("closed")
	}
	return nil
}

// holdTunnels opens COUNT CONNECT tunnels through the proxy at NETWORK
// ADDRESS to an echo server of its own, checks each echoes, prints
// "ready" and keeps them until stdin closes.
func holdTunnels(args []string) error {
	n, _ := strconv.Atoi(args[2])
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer echo.Close()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	target := echo.Addr().String()
	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial(args[0], args[1])
		if err != nil {
			return err
		}
		conns = append(conns, c)
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
		r := bufio.NewReader(c)
		status, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(status, "HTTP/1.1 200") {
			return fmt.Errorf("tunnel %d: %q %v", len(conns), status, err)
		}
		if _, err := r.ReadString('\n'); err != nil {
			return err
		}
		c.Write([]byte("x"))
		if _, err := io.ReadFull(r, make([]byte, 1)); err != nil {
			return err
		}
	}
	fmt.Println("ready")
	io.Copy(io.Discard, os.Stdin)
	return nil
}

// connectBench times N rounds of a direct connect to TARGET, a CONNECT to
// it through the proxy at PROXY and one through the bare CONNECT relay at
// RELAY, each closed at once, and prints the nanoseconds of each:
// "direct D connect C relay R" per line.
func connectBench(args []string) error {
	proxy, target, relay := args[0], args[1], args[3]
	n, _ := strconv.Atoi(args[2])
	req := []byte(fmt.Sprintf("CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target))
	tunnel := func(addr string) (time.Duration, error) {
		var resp [39]byte // HTTP/1.1 200 Connection established\r\n\r\n
		start := time.Now()
		c, err := net.Dial("tcp", addr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		c.Write(req)
		if _, err := io.ReadFull(c, resp[:]); err != nil || !strings.HasPrefix(string(resp[:]), "HTTP/1.1 200") {
			return 0, fmt.Errorf("CONNECT through %s: %q %v", addr, resp, err)
		}
		return time.Since(start), nil
	}
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	for range n {
		start := time.Now()
		c, err := net.Dial("tcp", target)
		if err != nil {
			return err
		}
		direct := time.Since(start)
		c.Close()
		connect, err := tunnel(proxy)
		if err != nil {
			return err
		}
		relayed, err := tunnel(relay)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "direct %d connect %d relay %d\n", direct, connect, relayed)
	}
	return nil
}

// resolveName sends a SOCKS5 RESOLVE of NAME to the proxy at NETWORK
// ADDRESS and prints the reply and the address it carries.
func resolveName(args []string) error {
	c, err := net.Dial(args[0], args[1])
	if err != nil {
		return err
	}
	defer c.Close()
	name := args[2]
	req := []byte{5, 1, 0, 5, 0xf0, 0, 3, byte(len(name))}
	req = append(req, name...)
	req = append(req, 0, 0)
	if _, err := c.Write(req); err != nil {
		return err
	}
	var reply [2 + 10]byte
	if _, err := io.ReadFull(c, reply[:]); err != nil {
		return err
	}
	fmt.Printf("reply %d %d.%d.%d.%d\n", reply[3], reply[6], reply[7], reply[8], reply[9])
	return nil
}
