# nothing but a comment

