{
  "targets": [
    {
      "target_name": "murphy_native",
      "sources": [
        "<!@(node -p \"require('fs').readdirSync('native/cpu').filter(f => f.endsWith('.cc')).map(f => 'native/cpu/' + f).join(' ')\")",
        "<!@(node -p \"require('fs').readdirSync('native/addon').filter(f => f.endsWith('.cc')).map(f => 'native/addon/' + f).join(' ')\")",
        "<!@(node -p \"require('fs').readdirSync('native/model').filter(f => f.endsWith('.cc')).map(f => 'native/model/' + f).join(' ')\")",
        "<!@(node -p \"require('fs').readdirSync('native/gpu').filter(f => f.endsWith('.cc')).map(f => 'native/gpu/' + f).join(' ')\")",
        "<!@(node -p \"require('fs').readdirSync('native/gpu/engine').filter(f => f.endsWith('.cc')).map(f => 'native/gpu/engine/' + f).join(' ')\")",
        "native/dispatch.cc",
        "native/validate.cc",
        "native/grpo_stats.cc"
      ],
      "include_dirs": [
        "<!@(node -p \"require('node-addon-api').include\")",
        "native/include"
      ],
      "defines": ["NAPI_VERSION=8", "NODE_ADDON_API_CPP_EXCEPTIONS", "NODE_ADDON_API_DISABLE_DEPRECATED"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti", "-std=gnu++17"],
      "cflags": ["-O3", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math"],
      "cflags_cc": ["-O3", "-std=c++17", "-fexceptions", "-fopenmp-simd", "-fno-math-errno", "-fno-trapping-math", "-Wall", "-Wno-unknown-pragmas"],
      "ldflags": ["-pthread"],
      "libraries": ["-ldl"]
    }
  ]
}
