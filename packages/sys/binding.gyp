{
  "targets": [
    {
      "target_name": "cnikit_sys",
      "sources": ["src/sys.c"],
      "cflags": ["-std=gnu11", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-fvisibility=hidden"],
      "defines": ["NAPI_VERSION=8", "_GNU_SOURCE"]
    }
  ]
}
