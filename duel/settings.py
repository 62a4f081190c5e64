"""Duel settings: one file, driven by environment variables.

Unset variables mean the embedded default (SQLite under var/, eager Celery, files under
var/media). ``DATABASE_URL`` selects PostgreSQL, ``REDIS_URL`` a real broker and result
backend, ``AWS_STORAGE_BUCKET_NAME`` S3 storage through django-storages.
"""

from __future__ import annotations

import os
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(os.environ.get("DUEL_VAR_DIR", BASE_DIR / "var"))


def env_bool(name: str, default: bool = False) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    return value.strip().lower() in {"1", "true", "yes", "on"}


# Core
DUEL_ENV = os.environ.get("DUEL_ENV", "development")
PRODUCTION = DUEL_ENV == "production"
DEBUG = env_bool("DJANGO_DEBUG", not PRODUCTION)
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if not SECRET_KEY:
    if PRODUCTION:
        raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set when DUEL_ENV=production")
    SECRET_KEY = "dev-only-insecure-key-do-not-use-in-production"
ALLOWED_HOSTS = [
    h.strip()
    for h in os.environ.get("DJANGO_ALLOWED_HOSTS", "127.0.0.1,localhost,testserver").split(",")
    if h.strip()
]
CSRF_TRUSTED_ORIGINS = [
    o.strip() for o in os.environ.get("DJANGO_CSRF_TRUSTED_ORIGINS", "").split(",") if o.strip()
]
# Services the test suite must find instead of skipping (CI sets it).
DUEL_REQUIRE_SERVICES = env_bool("DUEL_REQUIRE_SERVICES")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "ledger",
    "rounds",
    "media_pipeline",
    "voting",
    "juries",
    "stats",
]
if os.environ.get("AWS_STORAGE_BUCKET_NAME"):
    INSTALLED_APPS.append("storages")

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "duel.urls"
WSGI_APPLICATION = "duel.wsgi.application"
ASGI_APPLICATION = "duel.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Database
DATABASE_URL = os.environ.get("DATABASE_URL", "")
if DATABASE_URL:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60)}
else:
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "duel.sqlite3",
            # WAL lets the demo's gateway thread read while a run writes; synchronous=NORMAL
            # is safe with WAL and spares an fsync per commit on the embedded default.
            "OPTIONS": {
                "timeout": 30,
                "transaction_mode": "IMMEDIATE",
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
            },
        }
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Cache (rate limits, the gateway's fair queue use Redis when it is configured)
REDIS_URL = os.environ.get("REDIS_URL", "")
if REDIS_URL:
    CACHES = {
        "default": {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Celery
CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL", REDIS_URL or "memory://")
CELERY_RESULT_BACKEND = os.environ.get("CELERY_RESULT_BACKEND", REDIS_URL or "cache+memory://")
CELERY_TASK_ALWAYS_EAGER = not (REDIS_URL or os.environ.get("CELERY_BROKER_URL"))
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_TRACK_STARTED = True
CELERY_TASK_TIME_LIMIT = int(os.environ.get("DUEL_TASK_TIME_LIMIT", 4 * 3600))
CELERY_TASK_SOFT_TIME_LIMIT = CELERY_TASK_TIME_LIMIT - 60
# Longer than the longest job (a 2-hour film's analysis and proxy), so Redis never
# redelivers a task that is still running.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": CELERY_TASK_TIME_LIMIT + 3600}
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("DUEL_CELERY_QUEUE", "duel")
# Periodic reaper: runs whose worker died are taken up again (celery beat).
CELERY_BEAT_SCHEDULE = {
    "reap-stale-runs": {
        "task": "rounds.tasks.reap_stale_runs",
        "schedule": 300.0,
        "args": (900.0,),
    },
    # Engine requests a dead worker left running are failed and their credit released.
    "reap-stale-engine-requests": {
        "task": "rounds.tasks.reap_stale_engine_requests",
        "schedule": 300.0,
    },
    # Scratch files of killed workers (older than any task can run) are removed.
    "sweep-scratch": {"task": "media_pipeline.sweep_scratch", "schedule": 3600.0},
}
# The longest one engine call may take: an engine slot's lease, and the age after which the
# reaper fails a request still "running" (its worker died) and releases its credit.
DUEL_ENGINE_REQUEST_TIMEOUT_S = float(os.environ.get("DUEL_ENGINE_REQUEST_TIMEOUT_S", 1800))
DUEL_SCRATCH_MAX_AGE_S = float(
    os.environ.get("DUEL_SCRATCH_MAX_AGE_S", CELERY_TASK_TIME_LIMIT + 3600)
)
# How often a run's worker polls its provider.
DUEL_RUN_POLL_INTERVAL_S = float(os.environ.get("DUEL_RUN_POLL_INTERVAL_S", "2.0"))

# Storage
MEDIA_ROOT = Path(os.environ.get("DUEL_MEDIA_ROOT", VAR_DIR / "media"))
MEDIA_URL = "/media/"
STATIC_URL = "/static/"
STATIC_ROOT = VAR_DIR / "static"
STATICFILES_DIRS = [BASE_DIR / "static"]
AWS_STORAGE_BUCKET_NAME = os.environ.get("AWS_STORAGE_BUCKET_NAME", "")
if AWS_STORAGE_BUCKET_NAME:
    AWS_S3_ENDPOINT_URL = os.environ.get("AWS_S3_ENDPOINT_URL") or None
    AWS_S3_REGION_NAME = os.environ.get("AWS_S3_REGION_NAME") or None
    AWS_DEFAULT_ACL = None
    AWS_QUERYSTRING_AUTH = True
    AWS_S3_FILE_OVERWRITE = False
    DEFAULT_STORAGE = {"BACKEND": "storages.backends.s3.S3Storage"}
else:
    DEFAULT_STORAGE = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": MEDIA_ROOT, "base_url": MEDIA_URL},
    }
STORAGES = {
    "default": DEFAULT_STORAGE,
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
}
FILE_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024

# Media tools
DUEL_FFMPEG = os.environ.get("DUEL_FFMPEG", "ffmpeg")
DUEL_FFPROBE = os.environ.get("DUEL_FFPROBE", "ffprobe")
DUEL_WORK_DIR = Path(os.environ.get("DUEL_WORK_DIR", VAR_DIR / "work"))

# Engines of common-engine rounds: engine_provider (a frozen control) -> adapter config.
DUEL_ENGINE_ADAPTERS = {"duel-reference": {"adapter": "reference"}}
if os.environ.get("DUEL_ENGINE_ADAPTERS_JSON"):
    import json

    DUEL_ENGINE_ADAPTERS.update(json.loads(os.environ["DUEL_ENGINE_ADAPTERS_JSON"]))
# The address entrants' systems use to reach the gateway.
DUEL_PUBLIC_BASE_URL = os.environ.get("DUEL_PUBLIC_BASE_URL", "http://127.0.0.1:8000")

# Transparency log
DUEL_LEDGER_SIGNING_KEY = os.environ.get("DUEL_LEDGER_SIGNING_KEY", "")
if PRODUCTION and not DUEL_LEDGER_SIGNING_KEY:
    raise ImproperlyConfigured("DUEL_LEDGER_SIGNING_KEY must be set when DUEL_ENV=production")
DUEL_LEDGER_KEY_FILE = Path(
    os.environ.get("DUEL_LEDGER_KEY_FILE", VAR_DIR / "keys" / "ledger-ed25519.key")
)
DUEL_LEDGER_ORIGIN = os.environ.get("DUEL_LEDGER_ORIGIN", "duel.local/log")

# How many reverse proxies' X-Forwarded-For entries to trust (voter network hashes).
DUEL_TRUSTED_PROXY_HOPS = int(os.environ.get("DUEL_TRUSTED_PROXY_HOPS", "0"))

# Pepper for salted hashes of private identifiers (provider request ids, voter networks).
DUEL_PUBLIC_SALT = os.environ.get("DUEL_PUBLIC_SALT", SECRET_KEY)

# REST API
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["duel.permissions.StaffWritePublicRead"],
    "EXCEPTION_HANDLER": "duel.api.exception_handler",
    "DEFAULT_PAGINATION_CLASS": "rest_framework.pagination.LimitOffsetPagination",
    "PAGE_SIZE": 100,
}
SPECTACULAR_SETTINGS = {
    "TITLE": "Duel API",
    "DESCRIPTION": "Public benchmarks of complete AI film-making systems.",
    "VERSION": "1.0.0",
}

# Auth
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]
LOGIN_URL = "/admin/login/"

# Internationalization
LANGUAGE_CODE = "en"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

# Security (production)
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("DUEL_LOG_LEVEL", "INFO")},
}
