import subprocess
import sys
import textwrap


def test_network_is_refused_and_recorded_loopback_allowed():
    code = textwrap.dedent(
        """
        import socket
        from speedopt.offline import forbid_network
        attempts = []
        forbid_network(attempts)
        try:
            socket.getaddrinfo("example.com", 443)
            print("RESOLVED")
        except ConnectionRefusedError as exc:
            print("REFUSED", exc)
        s = socket.socket()
        try:
            s.connect(("192.0.2.1", 80))
        except ConnectionRefusedError:
            print("REFUSED-CONNECT")
        server = socket.socket(); server.bind(("127.0.0.1", 0)); server.listen(1)
        client = socket.create_connection(server.getsockname())
        print("LOOPBACK-OK", attempts)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "RESOLVED" not in out.stdout
    assert "REFUSED" in out.stdout and "REFUSED-CONNECT" in out.stdout
    assert "LOOPBACK-OK ['socket.getaddrinfo example.com', 'socket.connect 192.0.2.1']" in out.stdout


def test_place_font(tmp_path):
    from speedopt.offline import place_font

    place_font(tmp_path)
    data = (tmp_path / "Arial.ttf").read_bytes()
    assert data[:4] in (b"\x00\x01\x00\x00", b"true")  # a TrueType font


def test_place_font_where_the_fonts_are_imports_no_matplotlib(tmp_path):
    """Every job places the fonts; once they are there, finding matplotlib's font costs no job 0.26 s of imports."""
    from speedopt.offline import place_font

    place_font(tmp_path)
    code = f"import sys; from speedopt.offline import place_font; place_font(__import__('pathlib').Path({str(tmp_path)!r})); print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr
