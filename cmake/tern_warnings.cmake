# tern_set_warnings(target): the warning set every tern target compiles with.
function(tern_set_warnings target)
    target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow=local -Wno-missing-field-initializers)
    if(TERN_WERROR)
        target_compile_options(${target} PRIVATE -Werror)
    endif()
endfunction()
