"""Passwords in the text a coding agent's session holds: the code and shell output it reads and
writes mention ``password`` all the time, and almost never hold one. ctxf's ``password`` rules
(``store/redact.py``: ``password = VALUE``, ``pwd = VALUE``, ``--password VALUE``, ``mysql -pVALUE``,
``sshpass -p VALUE``, ``scheme://user:VALUE@host``; gitleaks' rules on the word are scoped to a
file path or left out, ``store/gitleaks_rules.py``) must redact a real-looking literal and leave
the rest: code, types, calls, references, placeholders, documented defaults, common passwords.

Each line is tried as the text arrives in a Claude Code session (the shapes of the corpus's
``claude-code-jsonl/spotter`` sessions): as it is; as a Read result (``cat -n`` style, six-column
line number and ``→``); inside a tool call's JSON input (a Write's ``content``, an Edit's
``new_string``: ``\\"password\\": \\"...\\"``); inside JSON escaped twice (a Bash command inside a
tool call inside a JSONL line, as Cline stores it); and through ``ctxf ingest`` of a Claude Code
session holding them all. Before this file's fixes: 175 of the 1,110 false strings were redacted
and 19 of the 100 true ones missed; after: 0 and 0.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from context_forensics import api
from context_forensics.store.redact import Redactor
from context_forensics.store.secret_values import common_password, identifier

# What mentions a password and holds none, by where an agent meets it.
NOT_PASSWORDS = [
    # Python, Django, Flask, FastAPI
    'password = request.form["password"]', "password = request.POST.get('password')",
    'password = form.cleaned_data["password"]', "password=hash_password(raw)",
    "user.password = make_password(password)",
    "password_hash = bcrypt.hashpw(password.encode(), bcrypt.gensalt())", "password: Optional[str] = None",
    "password: str = Field(..., min_length=8)", "password: str", "if password != confirm_password:",
    "password = getpass.getpass()", 'password = getpass.getpass("Password: ")', "def check_password(self, password):",
    "def set_password(self, raw_password):", 'password=os.environ["PW"]', "password=os.environ['DB_PASSWORD']",
    "password = os.getenv('DB_PASSWORD')", 'PASSWORD_FIELD = "password"', "PASSWORD_HASHERS = [",
    "password = models.CharField(max_length=128)", "password = serializers.CharField(write_only=True)",
    "password1 = forms.CharField(widget=forms.PasswordInput)", "AUTH_PASSWORD_VALIDATORS = [",
    "user = authenticate(request, username=username, password=password)",
    "conn = psycopg2.connect(host=host, user=user, password=password)",
    'engine = create_engine(f"postgresql://{user}:{password}@{host}/{db}")',
    "password=settings.DATABASES['default']['PASSWORD'],", "password = kwargs.pop('password', None)",
    "password = self.cleaned_data.get('password2')", "password=args.password,",
    "password = config['database']['password']", "password = input('Enter password: ')", "password = password.strip()",
    "password = generate_password(length=16)", "password = secrets.token_urlsafe(16)", "self.password = password",
    "self.assertTrue(user.check_password('testpass123'))",
    "user = User.objects.create_user(username='alice', password='testpass123')",
    # code whose names hold digits (a call, a type, a module path), unquoted
    "password = b64encode(os.urandom(32)).decode()", "password = base64.b64decode(encoded).decode('utf-8')",
    "password = sha256_crypt.hash(raw)", "password: Uint8Array;", "password: Sha256Hash,",
    "password: String::from_utf8(bytes)?,", "password = hex2bin(value)", "password: Argon2Hash",
    "password = pbkdf2_hmac('sha256', pw, salt, 100000)", "password: H256,", "password = utf8_encode(pw)",
    "password := sha512.Sum512([]byte(pw))", "password = Base64.encode64(raw)", "password = md5hex(raw + salt)",
    # placeholders, documented defaults, common passwords (the first guesses of any list)
    "password = 'changeme'", 'password = "password123"', "password = 'secret'", "password = 'test'",
    "password = '<password>'", "password = '********'", "password = 'hunter2'", "password = ''", "password = 'admin'",
    "password = 'postgres'", "password='your-password-here'", "'password': 'password'", "password = 'admin123'",
    'password: "pass1234"', "password='qwerty123'", "'password': 'letmein1'", 'password = "P@ssw0rd"',
    "password='Passw0rd!'", "password: 'welcome1'", "DB_PASSWORD=admin1234", 'password: "abc12345"',
    "create_user(username='bob', password='bob12345')", "password = 'hunter22'", "MYSQL_ROOT_PASSWORD: root1234",
    "PGPASSWORD=postgres1 psql -h localhost -U postgres", 'password: "p4ssw0rd"', "password = '1q2w3e4r'",
    "password: 'abcd1234'", 'password: "Admin@123"', "password = 'changeme1'", "password: 'demo1234'",
    "password='user1234'", "password = 'Welcome1!'", "VALID_PASSWORD = 'ValidPass1!'",
    # JavaScript, TypeScript, React, Mongoose, zod
    "password: string;", "password?: string;", "const password = req.body.password;",
    "const { email, password } = req.body;", "const hash = await bcrypt.hash(password, 10);",
    "password: {type: String, required: true}", "password: { type: String, required: true, minlength: 8 },",
    "const [password, setPassword] = useState('');",
    '<input type="password" name="password" value={password} onChange={e => setPassword(e.target.value)} />',
    "password: z.string().min(8),", "password: process.env.DB_PASSWORD,",
    "password: process.env.DB_PASSWORD || 'postgres',", "if (!password) throw new Error('password is required');",
    "password: yup.string().required('Password is required'),", "this.password = await hashPassword(this.password);",
    "expect(res.body.password).toBeUndefined();", "password: '********',", "password: 'Password123!',",
    # Go
    'Password string `json:"password"`', 'Password  string `json:"password" db:"password_hash"`',
    'password := r.FormValue("password")', 'password := os.Getenv("DB_PASSWORD")',
    "hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.DefaultCost)", "Password: cfg.Password,",
    "if err := bcrypt.CompareHashAndPassword([]byte(user.PasswordHash), []byte(password)); err != nil {",
    # Rust
    "pub password: String,", "password: Option<String>,",
    'let password = std::env::var("DB_PASSWORD").expect("DB_PASSWORD must be set");',
    "let password_hash = argon2.hash_password(password.as_bytes(), &salt)?.to_string();",
    "fn verify_password(password: &str, hash: &str) -> bool {",
    # Elixir, Phoenix (mix phx.gen.auth)
    "field :password, :string, virtual: true, redact: true", "field :hashed_password, :string, redact: true",
    "|> validate_length(:password, min: 12, max: 72)",
    "def valid_password?(%User{hashed_password: hashed_password}, password)", 'password: "hello world!"',
    'password: System.get_env("DB_PASSWORD"),', 'password: "postgres",',
    "Bcrypt.verify_pass(password, hashed_password)",
    '%{"email" => email, "password" => password} = user_params',
    # Ruby, Rails
    "@password ||= Password.new(password_hash)", "has_secure_password",
    "params.require(:user).permit(:email, :password, :password_confirmation)",
    "validates :password, presence: true, length: { minimum: 8 }",
    "user = User.create!(email: 'a@b.c', password: 'password', password_confirmation: 'password')",
    "password: ENV['DB_PASSWORD']", "password: <%= ENV['DATABASE_PASSWORD'] %>",
    'password: <%= ENV.fetch("DB_PASSWORD") { "" } %>',
    # Java, Kotlin, C#, Spring
    "private String password;", "public void setPassword(String password) { this.password = password; }",
    "String password = passwordEncoder.encode(rawPassword);", "spring.datasource.password=${DB_PASSWORD}",
    "spring.datasource.password=", '@Column(name = "password", nullable = false)', 'val password: String = ""',
    "public string Password { get; set; }",
    # YAML, JSON, .env, docker-compose, Ansible, JSON Schema
    '"password": "${DB_PASSWORD}"', '"password": "{{ db_password }}"', "password: ${POSTGRES_PASSWORD}",
    "POSTGRES_PASSWORD: postgres", "POSTGRES_PASSWORD: example", "MYSQL_ROOT_PASSWORD: root",
    "MYSQL_ROOT_PASSWORD: rootpassword", "DB_PASSWORD=", "DB_PASSWORD=changeme",
    "DB_PASSWORD=$(cat /run/secrets/db_password)",
    "password: !vault |", '  password: "{{ vault_db_password }}"', "password_file: /run/secrets/db_password",
    "password_env: DB_PASSWORD", '"password": {"type": "string", "minLength": 8}',
    '"password": {"type": "string", "format": "password"}', '"password": null', '"password": "string"',
    '"passwordPolicy": {"minLength": 12}', "requirepass foobared",
    # SQL
    "CREATE TABLE users (id SERIAL PRIMARY KEY, email TEXT NOT NULL, password TEXT NOT NULL);",
    "  password VARCHAR(255) NOT NULL,", "SELECT id, password FROM users WHERE email = $1;",
    "UPDATE users SET password = $1 WHERE id = $2", "UPDATE users SET password = ? WHERE id = ?",
    "INSERT INTO users (email, password) VALUES (%s, %s)", "ALTER TABLE users RENAME COLUMN password TO password_hash;",
    "CREATE USER app WITH PASSWORD :'app_password';",
    # shell, CLI help
    'echo "$DOCKER_PASSWORD" | docker login -u "$DOCKER_USERNAME" --password-stdin',
    "docker login --username foo --password-stdin < ~/pw.txt",
    "mysql -u root -p\"$MYSQL_ROOT_PASSWORD\" -e 'SHOW DATABASES;'",
    "psql --password --username postgres", "  --password PASSWORD    the password to use",
    "  -p, --password TEXT    Password for the account", 'gh secret set DB_PASSWORD --body "$DB_PASSWORD"',
    'curl -u "$USER:$PASSWORD" https://api.example.com', "--password=$DB_PASSWORD", '--password "$(pass show db)"',
    "mysql --password PASSWORD1 db", "psql --password pw123456", "mysql -u root -p app_db",
    "mysqldump -u root -p -P3306 app",
    "sshpass -p \"$SSH_PASS\" ssh deploy@host",
    # prose, docs, test output
    "Reset your pass(word) from the settings page.",
    "The password must be at least 8 characters long and contain a digit.",
    "Password: the user's password (hashed with bcrypt before storage).",
    "- `password` (string, required): the account password",
    "| password | string | yes | The user's password |", "password: the password for the database user (default: none)",
    "Default credentials: username `admin`, password `admin`.", "Set password=... in your .env file.",
    "passphrase: the key's passphrase, if any", "The default password is `changeme`; change it after the first login.",
    "Enter your password: ", "Password for 'https://github.com': ",
    "FAILED tests/test_auth.py::test_login_with_wrong_password - AssertionError: assert 401 == 200",
    "E       AssertionError: password mismatch",
    # test fixtures
    "def test_login(client): client.post('/login', data={'username': 'bob', 'password': 'pw'})",
    "@pytest.fixture\ndef password():\n    return 'testpassword'",
    "it('rejects a short password', () => { expect(validate({password: 'abc'})).toBe(false) })",
    '  password: "correct horse battery staple"',
    # pwd: the working directory
    "pwd = os.getcwd()", "pwd=$(pwd)", "PWD=/home/user/project", 'cd "$(pwd)"', "pwd = Path.cwd()",
    "pwd = 'C:/Users/dev2/project'", "pwd: src/app2",
    # URLs: references, placeholders, defaults
    "url = 'postgres://user:pass@localhost/db'", "DATABASE_URL=postgres://postgres:postgres@localhost:5432/app_dev",
    "DATABASE_URL=postgresql://user:password@localhost:5432/mydb", "redis://:${REDIS_PASSWORD}@redis:6379/0",
    "mongodb://${MONGO_USER}:${MONGO_PASS}@mongo:27017", "amqp://guest:guest@localhost:5672/",
    "https://{user}:{password}@host/", 'f"postgresql://{settings.DB_USER}:{settings.DB_PASSWORD}@{settings.DB_HOST}/x"',
    "`postgres://${user}:${pass}@${host}:${port}/${db}`", "DATABASE_URL=ecto://USER:PASS@HOST/DATABASE",
    "mysql://root:root@127.0.0.1:3306/test", "url = 'postgresql://user:pass1234@localhost/db'",
    "redis://default:redis123@localhost:6379",
]

# (text, the password in it): real-looking literals.
PASSWORDS = [
    ('password = "Xk9#mP2$vL8q"', "Xk9#mP2$vL8q"), ("DB_PASSWORD=s3cr3tV4lu3!x", "s3cr3tV4lu3!x"),
    ("mysql -u root -p'Tr0ub4dor&3' app", "Tr0ub4dor&3"),
    ("mysqldump -uroot -pZq8vN3kLw2 app > dump.sql", "Zq8vN3kLw2"),
    ("postgres://app:Zq8vN3kLw2@db.internal:5432/app", "Zq8vN3kLw2"), ('"password": "h7Gk2pQ9xZ4w"', "h7Gk2pQ9xZ4w"),
    ("POSTGRES_PASSWORD: Wk3nT9zPq2Lx", "Wk3nT9zPq2Lx"), ('password: "R4nd0mP@ssw0rd2024"', "R4nd0mP@ssw0rd2024"),
    ("export MYSQL_PASSWORD='9fJ2kL8mQ3xV'", "9fJ2kL8mQ3xV"),
    ("spring.datasource.password=N8w2Kq5ZxT4r", "N8w2Kq5ZxT4r"),
    ("sshpass -p 'Gq4Zr8Lw2Kx9' ssh deploy@10.0.0.4", "Gq4Zr8Lw2Kx9"),
    ("mysql --password=Tr0ub4dor3x db", "Tr0ub4dor3x"),
    ("https://deploy:Gh5Kp2Lq9Wz3@registry.internal/v2/", "Gh5Kp2Lq9Wz3"),
    ("conn = psycopg2.connect(host='db', user='app', password='Vb6Mn3Qw8Rt1')", "Vb6Mn3Qw8Rt1"),
    ("PGPASSWORD=Zq8vN3kLw2 psql -h db -U app", "Zq8vN3kLw2"), ("psql --password Qm7Rt2Wx9Kp4", "Qm7Rt2Wx9Kp4"),
    ("pwd='Kp4Qm7Rt2Wx9'", "Kp4Qm7Rt2Wx9"), ("config :app, App.Repo, password: \"Lw2Kx9Gq4Zr8\"", "Lw2Kx9Gq4Zr8"),
    ("redis://:Zr8Lw2Kx9Gq4@cache:6379", "Zr8Lw2Kx9Gq4"), ("password: 'monkey7Banana'", "monkey7Banana"),
]


def _as_read_result(text: str, first: int = 42) -> str:
    """Claude Code's Read tool result: ``cat -n`` style, the number right-aligned in six columns, then ``→``."""
    return "\n".join(f"{n:>6}→{line}" for n, line in enumerate(text.split("\n"), first))


def _shapes(text: str) -> dict[str, str]:
    return {"as is": text, "Read result": _as_read_result("    " + text),
            "Write input": json.dumps({"file_path": "/app/src/x.py", "content": text}),
            "Edit input": json.dumps({"file_path": "/app/src/x.py", "old_string": "x = 1", "new_string": text}),
            "escaped twice": json.dumps(json.dumps({"command": text}))}


def _false_hits() -> list[tuple[str, str, str]]:
    r = Redactor()
    return [(shape, s, out) for text in NOT_PASSWORDS for shape, s in _shapes(text).items() if (out := r.text(s)) != s]


def test_code_config_shell_and_prose_that_name_a_password_hold_none():
    hits = _false_hits()
    assert hits == [], f"{len(hits)} of {len(NOT_PASSWORDS) * 5} redacted: {hits[:5]}"


@pytest.mark.parametrize(("text", "secret"), PASSWORDS, ids=[s for _, s in PASSWORDS])
def test_a_real_looking_password_is_redacted_in_every_shape(text, secret):
    for shape, s in _shapes(text).items():
        r = Redactor()
        out = r.text(s)
        assert secret not in out and sum(r.counts.values()) == 1, (shape, out)
        assert set(r.counts) <= {"password", "url-password"}, (shape, r.counts)


def test_the_judgments_behind_them():
    assert all(common_password(v) for v in ("admin123", "P@ssw0rd!", "adm1n123",
                                            "Welcome1!", "1q2w3e4r", "Summer2024!"))
    assert not any(common_password(v) for v in ("Xk9#mP2$vL8q", "Tr0ub4dor&3", "s3cr3tV4lu3!x", "monkey7Banana",
                                                "R4nd0mP@ssw0rd2024", "Kqzvbnmt7"))
    assert all(identifier(v) for v in ("b64encode", "sha256_crypt.hash", "Uint8Array", "String::from_utf8"))
    assert not any(identifier(v) for v in ("h7Gk2pQ9xZ4w", "Zq8vN3kLw2", "deadbeef12345678"))


def _claude_code_session(d: Path, lines: list[str], sid: str) -> Path:
    """A Claude Code JSONL session (the records of the corpus's spotter sessions, v2.1): the agent
    Reads a file of ``lines``, Edits one of them in, Writes them, runs one as a Bash command."""
    base = {"isSidechain": False, "userType": "external", "cwd": "/home/dev/app", "sessionId": sid,
            "version": "2.1.40", "gitBranch": "main"}
    usage = {"input_tokens": 10, "cache_creation_input_tokens": 200, "cache_read_input_tokens": 3000,
             "output_tokens": 30}
    body = "\n".join(lines)
    calls = [("Read", {"file_path": "/home/dev/app/settings.py"}, _as_read_result(body, 1)),
             ("Edit", {"file_path": "/home/dev/app/settings.py", "old_string": lines[0], "new_string": lines[-1]},
              "The file /home/dev/app/settings.py has been updated."),
             ("Write", {"file_path": "/home/dev/app/notes.md", "content": body}, "File created successfully"),
             ("Bash", {"command": lines[len(lines) // 2], "description": "run it"}, body)]
    out = [{**base, "parentUuid": None, "type": "user", "uuid": "u-0", "timestamp": "2026-02-01T10:00:00.000Z",
            "message": {"role": "user", "content": "Fix the login form"}}]
    for i, (name, args, result) in enumerate(calls):
        out.append({**base, "parentUuid": out[-1]["uuid"], "type": "assistant", "uuid": f"a-{i}",
                    "timestamp": f"2026-02-01T10:0{i}:10.000Z", "requestId": f"req_{i}",
                    "message": {"model": "claude-sonnet-4-5", "id": f"msg_{i}", "type": "message", "role": "assistant",
                                "content": [{"type": "tool_use", "id": f"toolu_{i}", "name": name, "input": args}],
                                "usage": usage}})
        out.append({**base, "parentUuid": f"a-{i}", "type": "user", "uuid": f"r-{i}",
                    "timestamp": f"2026-02-01T10:0{i}:20.000Z", "message": {"role": "user", "content": [
                        {"tool_use_id": f"toolu_{i}", "type": "tool_result", "content": result}]}})
    p = d / f"{sid}.jsonl"
    p.write_text("".join(json.dumps(x) + "\n" for x in out))
    return p


def test_a_claude_code_session_keeps_its_code_and_loses_its_passwords(tmp_path):
    clean = _claude_code_session(tmp_path, NOT_PASSWORDS, "33333333-4444-4555-8666-777777777777")
    res = api.ingest(clean, db=tmp_path / "a.db").to_dict()
    assert res["totals"]["ingested"] == 1 and not res["files"][0]["redacted"], res["files"][0]["redacted"]
    leaky = _claude_code_session(tmp_path, [t for t, _ in PASSWORDS], "44444444-5555-4666-8777-888888888888")
    res = api.ingest(leaky, db=tmp_path / "b.db").to_dict()
    assert res["totals"]["ingested"] == 1 and res["files"][0]["redacted"]
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("b.db*"))  # the store, its WAL
    assert [s for _, s in PASSWORDS if s.encode() in stored] == []
